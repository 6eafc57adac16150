"""Farm: a set of virtual phones sharing the loaded app files, deterministic from a seed."""
from simfarm.appspec import load_apps
from simfarm.phone import VirtualPhone


class Farm:
    def __init__(self, devices: int = 4, seed: int = 0, apps_dir=None, anomaly_rate: float = 0.0, features=None):
        self.seed = seed
        self.apps = load_apps(apps_dir)
        phones = [VirtualPhone(i, seed, self.apps, anomaly_rate=anomaly_rate, features=features) for i in range(devices)]
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
