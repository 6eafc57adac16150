"""`python manage.py rl_pool bank`: Phase 0 — bank naturally difficult queries in the RL pool."""
from django.core.management.base import BaseCommand

from flywheel.pools.rl import bank_phase0


class Command(BaseCommand):
    help = "Bank queries in the RL query pool by objective difficulty features (Phase 0, §2.4.3)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["bank"])

    def handle(self, *args, action, **options):
        banked = bank_phase0()
        self.stdout.write(self.style.SUCCESS(f"Phase 0: {banked} queries banked in the RL pool"))
