"""`python manage.py import_benchmark`: benchmark versions from MobileGUI-VBench and the farm's tasks.

    manage.py import_benchmark --vbench PATH [--name MobileGUI-VBench --version v1] [--freeze-as-reviewed]
    manage.py import_benchmark --farm simfarm/tasks/tasks.jsonl [--farm-name farm-tasks --farm-version v1]
    manage.py import_benchmark --farm ... --vbench ... --seed    (what `make up` runs: safe to rerun)

With --seed a missing VBench file is skipped with a note and a version already there is left as
it is, so the first-run seeding never fails on a second run.
"""
from collections import Counter
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.imports import BenchmarkImportError, import_farm_tasks, import_vbench_file
from benchmark.models import Benchmark


class Command(BaseCommand):
    help = "Import MobileGUI-VBench (left in expert review) and/or the farm's task set (frozen)."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names a benchmark version here, in place of Django's "print the version" flag.
        kwargs.setdefault("conflict_handler", "resolve")
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--vbench", metavar="PATH", help="MobileGUI-VBench.jsonl")
        parser.add_argument("--name", default="MobileGUI-VBench", help="the VBench version's name")
        parser.add_argument("--version", dest="bench_version", default="v1", help="the VBench version's version")
        parser.add_argument("--freeze-as-reviewed", action="store_true",
                            help="approve every VBench item as published and freeze at once")
        parser.add_argument("--farm", metavar="PATH", help="the farm's task set in the query format")
        parser.add_argument("--farm-name", default="farm-tasks")
        parser.add_argument("--farm-version", default="v1")
        parser.add_argument("--held-out-share", type=float, default=0.34)
        parser.add_argument("--seed", action="store_true",
                            help="first-run seeding: skip a missing file or a version already there")

    def handle(self, *args, **options):
        if not options["vbench"] and not options["farm"]:
            raise CommandError("name a file: --vbench PATH and/or --farm PATH")
        seed, failed = options["seed"], []
        for kind, step in (("farm", self.import_farm), ("vbench", self.import_vbench)):
            if not options[kind]:
                continue
            try:
                step(Path(options[kind]), options, seed)
            except CommandError as error:
                if not seed:
                    raise
                self.stderr.write(f"Benchmark: {error}")  # seeding goes on with the next file
                failed.append(kind)
        if failed:
            raise CommandError(f"not seeded: {', '.join(failed)}")

    def import_farm(self, path, options, seed):
        if not path.is_file():
            raise CommandError(f"{path}: no such task file")
        try:
            benchmark = import_farm_tasks(path, name=options["farm_name"], version=options["farm_version"],
                                          held_out_share=options["held_out_share"])
        except BenchmarkImportError as error:
            raise CommandError(f"{path}: not imported: {error}")
        report = benchmark.import_report
        splits = Counter(benchmark.items.values_list("split", flat=True))
        if report["created"]:
            self.stdout.write(f"Benchmark: {benchmark} frozen from {path.name}: {splits['open']} open, "
                              f"{splits['held_out']} held out (evaluation only)")
        else:
            self.stdout.write(f"Benchmark: {benchmark} is there already ({benchmark.get_status_display().lower()}, "
                              f"{splits['open']} open, {splits['held_out']} held out); unchanged")
            if report["missing"]:
                self.stdout.write(f"  {len(report['missing'])} queries of {path.name} are not in it "
                                  f"(first: {', '.join(report['missing'][:3])}); derive a new version to add them")

    def import_vbench(self, path, options, seed):
        name, version = options["name"], options["bench_version"]
        if not path.is_file():
            if seed:
                self.stdout.write(f"Benchmark: {path} not found; MobileGUI-VBench not imported")
                return
            raise CommandError(f"{path}: no such file")
        existing = Benchmark.objects.filter(name=name, version=version).first()
        if existing is not None and seed:
            self.stdout.write(f"Benchmark: {existing} is there already "
                              f"({existing.get_status_display().lower()}); unchanged")
            return
        try:
            benchmark = import_vbench_file(path, name=name, version=version,
                                           freeze_as_reviewed=options["freeze_as_reviewed"])
        except BenchmarkImportError as error:
            if len(error.problems) == 1:
                raise CommandError(f"{path}: nothing imported: {error.problems[0]}")
            lines = "\n".join(f"  {p}" for p in error.problems[:50])
            more = f"\n  … and {len(error.problems) - 50} more" if len(error.problems) > 50 else ""
            raise CommandError(f"{path}: nothing imported, {len(error.problems)} problems:\n{lines}{more}")
        items = benchmark.items.all()
        blocked = items.filter(executable=False)
        self.stdout.write(f"Benchmark: {benchmark} imported from {path.name}: {items.count()} queries, "
                          f"{benchmark.get_status_display().lower()}")
        if blocked.exists():
            reasons = Counter(blocked.values_list("not_executable_reason", flat=True))
            first = "; ".join(f"{reason} ({n})" for reason, n in reasons.most_common(3))
            self.stdout.write(f"  {blocked.count()} of them cannot run on any phone here: {first}")
