"""`python manage.py evaluate`: evaluate a model on a frozen benchmark version; re-judge; export.

    manage.py evaluate --benchmark NAME [--version V] --model MODEL_VERSION [--split all|open|held_out]
                       [--set max_steps=10 --set phones=2 ...] [--wait]
    manage.py evaluate --rejudge RUN_ID
    manage.py evaluate --export RUN_ID --out DIR

Without --wait the rollouts go to the Celery workers (one queue per phone host) and the run's id
and page are printed; with --wait this process drives the phones itself, host by host, prints the
progress and the final scores, so it works with no worker running.
"""
import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from benchmark.exports import write_run_export
from benchmark.infer import DEFAULT_INFER, EvaluationRefused, launch_evaluation, refresh_evaluation
from benchmark.judges import rejudge_evaluation
from benchmark.models import Benchmark, EvalRun
from devices.registry import discover_devices
from flywheel.collection.driver import drive_host
from flywheel.models import ModelVersion
from flywheel.policies import default_policy_version

FINISHED = (EvalRun.Status.DONE, EvalRun.Status.CANCELLED, EvalRun.Status.FAILED, EvalRun.Status.PAUSED)


def parse_settings(pairs) -> dict:
    """--set key=value pairs; a value is read as JSON (numbers, true/false) where it parses."""
    config = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--set {pair!r}: expected key=value (known keys: {', '.join(sorted(DEFAULT_INFER))})")
        try:
            config[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            config[key.strip()] = value
    return config


class Command(BaseCommand):
    help = "Evaluate a model version on a frozen benchmark version (or re-judge / export a run)."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names a benchmark version here, in place of Django's "print the version" flag.
        kwargs.setdefault("conflict_handler", "resolve")
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", help="the benchmark's name")
        parser.add_argument("--version", dest="bench_version", help="its version (default: the newest frozen one)")
        parser.add_argument("--model", help="the model version's name (default: the built-in offline policy)")
        parser.add_argument("--split", choices=["all", "open", "held_out"], default="all")
        parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                            help=f"an inference setting ({', '.join(sorted(DEFAULT_INFER))})")
        parser.add_argument("--wait", action="store_true", help="drive the phones in this process and wait")
        parser.add_argument("--timeout", type=float, default=3600, help="with --wait: give up after these seconds")
        parser.add_argument("--rejudge", type=int, metavar="RUN_ID", help="judge a finished run again")
        parser.add_argument("--export", type=int, metavar="RUN_ID", help="write a run's results to --out")
        parser.add_argument("--out", metavar="DIR", help="where --export writes")

    def handle(self, *args, **options):
        if options["export"] is not None:
            return self.export(options["export"], options["out"])
        if options["rejudge"] is not None:
            return self.rejudge(options["rejudge"])
        if not options["benchmark"]:
            raise CommandError("--benchmark NAME is needed (or --rejudge RUN_ID, or --export RUN_ID --out DIR)")
        benchmark = self.find_benchmark(options["benchmark"], options["bench_version"])
        model = self.find_model(options["model"])
        config = parse_settings(options["overrides"])
        discover_devices()  # the phone profiles pinned into the run are the phones as they are now
        try:
            evaluation = launch_evaluation(benchmark, model, split=options["split"], config=config,
                                           dispatch=not options["wait"])
        except EvaluationRefused as error:
            raise CommandError(str(error))
        page = reverse("eval-run-detail", kwargs={"eval_run_id": evaluation.pk})
        skipped = len(evaluation.config.get("not_executable") or [])
        self.stdout.write(f"Evaluation run {evaluation.pk}: {model} on {benchmark} ({options['split']}), "
                          f"{evaluation.total} rollouts" + (f", {skipped} queries no phone here can run" if skipped
                                                            else ""))
        self.stdout.write(f"Page: {page}")
        if options["wait"]:
            self.drive(evaluation, options["timeout"])

    # ---- lookups ----

    def find_benchmark(self, name, version):
        versions = Benchmark.objects.filter(name=name)
        if not versions.exists():
            known = sorted(set(Benchmark.objects.values_list("name", flat=True)))
            raise CommandError(f"no benchmark named {name!r} (known: {', '.join(known) or 'none'})")
        if version is None:
            benchmark = versions.filter(frozen=True).order_by("-frozen_at", "-pk").first()
            if benchmark is None:
                raise CommandError(f"{name} has no frozen version yet: review its queries and freeze one first")
            return benchmark
        benchmark = versions.filter(version=version).first()
        if benchmark is None:
            raise CommandError(f"{name} has no version {version!r} "
                               f"(versions: {', '.join(versions.values_list('version', flat=True))})")
        if not benchmark.frozen:
            raise CommandError(f"{benchmark} is not frozen ({benchmark.get_status_display().lower()}): "
                               "review its queries and freeze it first")
        return benchmark

    def find_model(self, name):
        if not name:
            return default_policy_version()
        model = ModelVersion.objects.filter(name=name).first()
        if model is None:
            known = ", ".join(ModelVersion.objects.order_by("name").values_list("name", flat=True)[:20])
            raise CommandError(f"no model version named {name!r} (known: {known or 'none'})")
        return model

    def find_run(self, run_id):
        evaluation = EvalRun.objects.select_related("benchmark", "model_version").filter(pk=run_id).first()
        if evaluation is None:
            raise CommandError(f"no evaluation run {run_id}")
        return evaluation

    # ---- the phones, in this process ----

    def drive(self, evaluation, timeout):
        addresses = list(settings.ADB_SERVERS)
        per_host = max(1, int(evaluation.config["infer"].get("phones", 4)) // max(1, len(addresses)))
        deadline = time.monotonic() + timeout
        shown = None
        while True:
            # The budget is what is left of --timeout, so no pass hands the run on to the workers.
            budget = max(1.0, deadline - time.monotonic())
            drove = sum(drive_host(evaluation.collection_run_id, address, per_host, budget_s=budget)["phones"]
                        for address in addresses)
            refresh_evaluation(evaluation.pk)
            evaluation.refresh_from_db()
            progress = (evaluation.completed, evaluation.status)
            if progress != shown:
                self.stdout.write(f"  {evaluation.completed}/{evaluation.total} ({evaluation.get_status_display()})")
                shown = progress
            if evaluation.status in FINISHED:
                break
            if time.monotonic() > deadline:
                raise CommandError(f"evaluation run {evaluation.pk} did not finish within {timeout:.0f}s; "
                                   "its work stays queued for the workers")
            if not drove:  # no idle phone on any host right now: wait for one
                time.sleep(2)
        if evaluation.status == EvalRun.Status.PAUSED:
            raise CommandError(f"evaluation run {evaluation.pk} paused: {evaluation.status_reason}; "
                               "it resumes when the endpoint answers again")
        self.print_scores(evaluation)

    def print_scores(self, evaluation):
        scores = evaluation.scores or {}
        sr = scores.get("sr")
        self.stdout.write(self.style.SUCCESS(
            f"{evaluation}: SR {'—' if sr is None else f'{sr:.1%}'} "
            f"({scores.get('successes', 0)}/{scores.get('scored', 0)} scored)"))
        if scores.get("not_scored"):
            self.stdout.write(f"  not scored: {json.dumps(scores['not_scored'], ensure_ascii=False)}")
        if scores.get("waiting_for_expert"):
            self.stdout.write(f"  waiting for an expert (judges split): {scores['waiting_for_expert']}")
        agreement = scores.get("judge_agreement")
        if agreement is not None:
            self.stdout.write(f"  judge agreement: {agreement:.1%}")
        if scores.get("partial_credit") is not None:
            self.stdout.write(f"  partial credit (reported, not scored): {scores['partial_credit']:.2f}")

    # ---- re-judge, export ----

    def rejudge(self, run_id):
        evaluation = self.find_run(run_id)
        if evaluation.status in (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING):
            raise CommandError(f"evaluation run {run_id} is still {evaluation.get_status_display().lower()}: "
                               "re-judge it once it has finished, was paused or cancelled")
        report = rejudge_evaluation(evaluation)
        self.stdout.write(f"Re-judged {report['judged']} rollouts of run {run_id} (round {report['round']}) "
                          f"in {report['seconds']:.1f}s")
        evaluation.refresh_from_db()
        self.print_scores(evaluation)

    def export(self, run_id, out):
        if not out:
            raise CommandError("--export needs --out DIR")
        evaluation = self.find_run(run_id)
        paths = write_run_export(evaluation, out)
        self.stdout.write(f"Run {run_id} exported: " + ", ".join(paths.values()))
