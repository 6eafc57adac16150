"""First-run content: the built-in offline policy and the virtual farm's task set. Safe to rerun."""
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from flywheel.models import ModelVersion, Query
from flywheel.policies import OFFLINE_POLICY_NAME
from flywheel.query_io import QueryImportError, import_queries

TASK_SET_DIR = Path(settings.BASE_DIR) / "devices" / "simulator" / "tasks"


class Command(BaseCommand):
    help = "Register the offline policy and import the virtual farm's task set when no queries exist."

    def handle(self, *args, **options):
        ModelVersion.objects.get_or_create(name=OFFLINE_POLICY_NAME, defaults={"kind": "offline"})
        if Query.objects.exists():
            self.stdout.write(f"Queries: {Query.objects.count()} in the database.")
            return
        files = sorted(TASK_SET_DIR.glob("*.jsonl")) if TASK_SET_DIR.exists() else []
        for path in files:
            try:
                result = import_queries(path.read_text(encoding="utf-8"))
            except QueryImportError as error:
                self.stderr.write(f"{path}: not imported: {error}")
                continue
            self.stdout.write(f"Queries: imported {result['total']} from {path.name}")
        if not files:
            self.stdout.write("Queries: none yet; import some on /queries/import/.")
