"""Run a model host (`make model-host`): serve the trained checkpoints that need serving, unattended.

    manage.py model_host [--name gpu-1] [--interval 2]

Configured by MODEL_HOST_* (README, Environment). Ctrl-C or SIGTERM stops its servers first, so the
versions they served are plain checkpoints again, free for another host.
"""
import logging
import signal

from django.core.management.base import BaseCommand

from training.model_host.host import ModelHost


class Command(BaseCommand):
    help = "Serve trained checkpoint versions: claim, start, register, restart and stop their servers."

    def add_arguments(self, parser):
        parser.add_argument("--name", default="", help="this host's name (default MODEL_HOST_NAME or the hostname)")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between rounds")

    def handle(self, *args, **options):
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

        def stop(*_):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        host = ModelHost(options["name"])
        engine = host.engine_for()
        self.stdout.write(f"Model host {host.name!r}: {engine} servers from port {host.first_port}, "
                          f"reached at {host.address}; up to {host.max_servers} at once")
        try:
            host.run(options["interval"])
        except KeyboardInterrupt:
            self.stdout.write("Stopping its servers…")
        finally:
            host.shutdown()
