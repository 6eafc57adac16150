"""Farm: a set of virtual phones sharing the loaded app files, deterministic from a seed."""
from simfarm.appspec import load_apps
from simfarm.phone import VirtualPhone


class Farm:
    def __init__(self, devices: int = 4, seed: int = 0, apps_dir=None, anomaly_rate: float = 0.0, features=None,
                 blind_share: float = 0.0, real_phone: bool = False, handback_rate: float = 0.0,
                 first_device: int = 0):
        """`first_device`: the index of the first phone (its serial, profile and content), so that several
        farms numbered on from each other hold the phones one farm of them all would; `blind_share`: the
        share of ordinary app pages drawn as web views / canvases (seeded, the same pages on every phone);
        `real_phone`: phones answer only what a real phone answers; `handback_rate`: after each input, the
        chance that the app in front shows a hand-back state on its own (seeded per phone; real-phone
        mode too)."""
        if not 0.0 <= blind_share <= 1.0:
            raise ValueError(f"blind_share must be in [0, 1], not {blind_share}")
        if not 0.0 <= handback_rate <= 1.0:
            raise ValueError(f"handback_rate must be in [0, 1], not {handback_rate}")
        self.seed = seed
        self.blind_share, self.real_phone = float(blind_share), bool(real_phone)
        self.handback_rate = float(handback_rate)
        self.apps = load_apps(apps_dir)
        phones = [VirtualPhone(i, seed, self.apps, anomaly_rate=anomaly_rate, features=features,
                               blind_share=blind_share, real_phone=real_phone, handback_rate=handback_rate)
                  for i in range(first_device, first_device + devices)]
        self.phones: dict[str, VirtualPhone] = {phone.serial: phone for phone in phones}

    def factory_reset(self, serial: str) -> VirtualPhone:
        """Reset one phone in place to the state this farm created it in."""
        phone = self.phones[serial]
        phone.factory_reset()
        return phone

    def phone(self, serial: str) -> VirtualPhone:
        return self.phones[serial]

    def __iter__(self):
        return iter(self.phones.values())

    def __len__(self):
        return len(self.phones)
