"""`python manage.py simfarm --devices N --port 15037 [--seed S] [--apps DIR]`: run the virtual
phone farm as an ADB server. Needs no database."""
from django.core.management.base import BaseCommand, CommandError

from devices.simulator.serve import build_farm, serve_forever


class Command(BaseCommand):
    help = "Serve N virtual phones as an ADB server on a TCP port (adbutils / adb -P PORT)."
    requires_system_checks = []  # the farm never touches the database
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("--devices", type=int, default=4)
        parser.add_argument("--port", type=int, default=15037)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--apps", default=None, help="directory of extra app files")

    def handle(self, *args, devices, port, host, seed, apps, **options):
        if devices < 1:
            raise CommandError("--devices must be at least 1")
        farm = build_farm(devices, seed, apps)

        def announce(bound_port):
            self.stdout.write(f"virtual farm ADB server listening on port {bound_port}")
            self.stdout.flush()

        try:
            serve_forever(farm, host=host, port=port, on_ready=announce)
        except OSError as error:
            raise CommandError(f"cannot serve on {host}:{port}: {error}") from error
