"""`python manage.py discover_devices`: find and record the phones on every ADB server now."""
from django.core.management.base import BaseCommand

from devices.registry import discover_devices


class Command(BaseCommand):
    help = "Discover the phones on every ADB server in ADB_SERVERS (beat also does this every minute)."

    def handle(self, *args, **options):
        summary = discover_devices()
        for address, server in summary["servers"].items():
            if server["ok"]:
                self.stdout.write(f"{address}: {server['phones']} phone(s)")
            else:
                self.stderr.write(f"{address}: unreachable ({server['error']})")
        self.stdout.write(f"Phones: {summary['seen']} answering, {summary['offline']} marked offline")
