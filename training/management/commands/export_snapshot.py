"""Export a pool snapshot from the shell: `manage.py export_snapshot --kind sft [--config JSON]`, or
RL rollouts of an RL collection run in verl's per-step format: `--verl-run RUN --out PATH`."""
import json

from django.core.management.base import BaseCommand, CommandError

from flywheel.models import CollectionRun
from training.snapshots import create_snapshot


class Command(BaseCommand):
    help = "Export a pool snapshot (CPT/SFT chat format, RL parquet), or an RL run's rollouts for verl."

    def add_arguments(self, parser):
        parser.add_argument("--kind", choices=["cpt", "sft", "rl"])
        parser.add_argument("--config", default="{}", help='JSON, e.g. {"sources": {"htsc_true": 1}, "k": 5}')
        parser.add_argument("--name", default="")
        parser.add_argument("--verl-run", type=int, help="an RL collection run whose rollouts to export")
        parser.add_argument("--out", help="the file for --verl-run (.parquet or .jsonl)")

    def handle(self, *args, **options):
        if options["verl_run"]:
            return self.export_verl(options["verl_run"], options["out"])
        if not options["kind"]:
            raise CommandError("say what to export: --kind cpt|sft|rl, or --verl-run RUN --out PATH")
        try:
            config = json.loads(options["config"])
            snapshot = create_snapshot(options["kind"], config, name=options["name"], background=False)
        except ValueError as error:
            raise CommandError(f"not exported: {error}")
        self.stdout.write(f"snapshot #{snapshot.pk} {snapshot.status}: {snapshot.row_count} samples, "
                          f"hash {snapshot.content_hash or '-'}, {snapshot.directory or snapshot.error}")
        if snapshot.status != "ready":
            raise CommandError(snapshot.error or snapshot.status)

    def export_verl(self, run_id, out):
        from training.rl_data import export_verl_agent_loop

        if not out:
            raise CommandError("--out PATH is required with --verl-run")
        run = CollectionRun.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no collection run #{run_id}")
        try:
            stats = export_verl_agent_loop(run, out)
        except ValueError as error:
            raise CommandError(str(error))
        self.stdout.write(f"{out}: {json.dumps(stats, default=str)}")
