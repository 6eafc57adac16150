"""`python manage.py collect`: launch a collection run from the command line."""
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.collection.launch import LINES, launch_run, refresh_progress, selection_hint
from flywheel.models import CollectionRun, ModelVersion


class Command(BaseCommand):
    help = "Launch an automatic, schema-guided or external-replay collection run."

    def add_arguments(self, parser):
        parser.add_argument("--line", choices=LINES, default="automatic")
        parser.add_argument("--apps", nargs="*", default=[], help="packages the queries use")
        parser.add_argument("--tiers", nargs="*", default=[], choices=["L1", "L2", "L3"])
        parser.add_argument("--tags", nargs="*", default=[])
        parser.add_argument("--keys", nargs="*", default=[])
        parser.add_argument("--pool", choices=["rl"], help="only queries in this pool")
        parser.add_argument("--source", choices=["synthesized", "external", "derived", "rqa"])
        parser.add_argument("--limit", type=int)
        parser.add_argument("--policy", default=None, help="model version name (default: offline rules)")
        parser.add_argument("--phones", type=int, default=4)
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument("--max-steps", type=int, default=25)
        parser.add_argument("--timeout", type=float, default=300)
        parser.add_argument("--anomaly", action="append", default=[], metavar="KIND=RATE",
                            help="anomaly injection rate per step, e.g. notification=0.1")
        parser.add_argument("--inline", action="store_true",
                            help="drive the phones in this process instead of through Celery workers")
        parser.add_argument("--wait", action="store_true", help="wait and print progress until done")

    def handle(self, *args, **options):
        rates = {}
        for spec in options["anomaly"]:
            kind, _, rate = spec.partition("=")
            try:
                rates[kind] = float(rate)
            except ValueError:
                raise CommandError(f"--anomaly {spec!r}: expected KIND=RATE")
        version = None
        if options["policy"]:
            version = ModelVersion.objects.filter(name=options["policy"]).first()
            if version is None:
                raise CommandError(f"no model version named {options['policy']!r}")
        query_filter = {k: options[k] for k in ("apps", "tiers", "tags", "keys", "pool", "source", "limit")
                        if options[k]}
        config = {"phones": options["phones"], "repeats": options["repeats"],
                  "max_steps": options["max_steps"], "timeout_s": options["timeout"], "anomaly_rates": rates}
        discover_devices()
        run = launch_run(options["line"], query_filter, version, config, dispatch=not options["inline"])
        if run.total == 0:
            run.delete()
            raise CommandError(f"No query matches that selection; nothing was launched. {selection_hint()}")
        self.stdout.write(f"{run} launched: {run.total} trajectories to collect")
        if options["inline"]:
            for address in settings.ADB_SERVERS:
                drive_host(run.pk, address, options["phones"])
        if options["wait"] or options["inline"]:
            while True:
                refresh_progress(run.pk)
                run = CollectionRun.objects.get(pk=run.pk)
                self.stdout.write(f"  {run.completed}/{run.total} ({run.get_status_display()})")
                if run.status in (CollectionRun.Status.DONE, CollectionRun.Status.CANCELLED, CollectionRun.Status.FAILED):
                    break
                time.sleep(2)
            destinations = {}
            for t in run.trajectories.all():
                destinations[t.destination or "pending"] = destinations.get(t.destination or "pending", 0) + 1
            self.stdout.write(self.style.SUCCESS(f"{run}: {destinations}"))
