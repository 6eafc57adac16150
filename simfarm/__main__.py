"""`python -m simfarm --devices N --port P --seed S [--apps DIR]`: a virtual phone farm
served as an ADB server (adbutils, or `adb -P P ...`, drive its phones like real ones)."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from simfarm.serve import build_farm, serve_forever


def _env_float(name: str) -> float:
    try:
        return float(os.environ.get(name, "") or 0.0)
    except ValueError:
        return 0.0


def _env_share() -> float:
    return _env_float("SIMFARM_BLIND_SHARE")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m simfarm", description=__doc__)
    parser.add_argument("--devices", type=int, default=4, help="number of virtual phones (4)")
    parser.add_argument("--first-device", type=int, default=0,
                        help="index of the first phone (0): a farm numbered on from another's holds the phones "
                             "after its phones (sim-0003 onward after a farm of two)")
    parser.add_argument("--port", type=int, default=15037,
                        help="TCP port of the ADB server (15037; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the phones' content (0)")
    parser.add_argument("--apps", default=None, help="directory of extra app files")
    parser.add_argument("--blind-share", type=float, default=_env_share(),
                        help="share of ordinary app pages drawn as web views / canvases, seeded "
                             "(0; env SIMFARM_BLIND_SHARE)")
    parser.add_argument("--real-phone", action="store_true", default=_env_flag("SIMFARM_REAL_PHONE"),
                        help="answer only what a real phone answers: no content://com.sim.* or "
                             "content://sim/* providers, com.sim.* broadcasts reach nobody "
                             "(env SIMFARM_REAL_PHONE=1)")
    parser.add_argument("--handback-rate", type=float, default=_env_float("SIMFARM_HANDBACK_RATE"),
                        help="after each input, the chance that the app in front shows a hand-back state "
                             "(forced update, region wall, captcha, ...) on its own, seeded; also with "
                             "--real-phone (0; env SIMFARM_HANDBACK_RATE)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log every request")
    return parser.parse_args(argv)


def announce(port: int) -> None:
    # One parseable line on stdout: scripts that start us with --port 0 read the port from it.
    print(f"virtual farm ADB server listening on port {port}", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.devices < 1:
        print("--devices must be at least 1", file=sys.stderr)
        return 2
    if args.first_device < 0:
        print("--first-device must be 0 or more", file=sys.stderr)
        return 2
    if not 0.0 <= args.blind_share <= 1.0:
        print("--blind-share must be between 0 and 1", file=sys.stderr)
        return 2
    if not 0.0 <= args.handback_rate <= 1.0:
        print("--handback-rate must be between 0 and 1", file=sys.stderr)
        return 2
    farm = build_farm(args.devices, args.seed, args.apps, blind_share=args.blind_share, real_phone=args.real_phone,
                      handback_rate=args.handback_rate, first_device=args.first_device)
    try:
        serve_forever(farm, host=args.host, port=args.port, on_ready=announce)
    except OSError as error:
        print(f"cannot serve on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
