"""Launch a training run from the shell, through the same service as the page:

    manage.py train --stage sft --snapshot 3 --config '{"model": {"path": "/models/qwen"}, "nproc": 8}'
    manage.py train --stage rl --base policy-7b --config '{"model": {"path": "/models/sft"}}' --wait

--inline runs it in this process (a GPU host without a worker); --wait follows a queued run.
"""
import json
import time

from django.core.management.base import BaseCommand, CommandError

from flywheel.models import ModelVersion
from training.config import ConfigError
from training.models import DataSnapshot, TrainingRun
from training.runs import RunError, create_run


class Command(BaseCommand):
    help = "Launch a CPT, SFT or RL training run."

    def add_arguments(self, parser):
        parser.add_argument("--stage", required=True, choices=["cpt", "sft", "rl"])
        parser.add_argument("--snapshot", type=int, help="the snapshot id (CPT, SFT)")
        parser.add_argument("--base", default="", help="the base model version's name")
        parser.add_argument("--config", default="{}", help="the run's config as JSON (unknown keys are refused)")
        parser.add_argument("--inline", action="store_true", help="run here instead of on the training queue")
        parser.add_argument("--wait", action="store_true", help="follow the run until it ends")

    def handle(self, *args, **options):
        snapshot = None
        if options["snapshot"]:
            snapshot = DataSnapshot.objects.filter(pk=options["snapshot"]).first()
            if snapshot is None:
                raise CommandError(f"no snapshot #{options['snapshot']}")
        base = None
        if options["base"]:
            base = ModelVersion.objects.filter(name=options["base"]).first()
            if base is None:
                raise CommandError(f"no model version named {options['base']!r}")
        try:
            config = json.loads(options["config"])
            run = create_run(options["stage"], config, snapshot=snapshot, base_model=base,
                             launch=not options["inline"])
        except (ValueError, ConfigError, RunError) as error:
            raise CommandError(f"not launched: {error}")
        self.stdout.write(f"{run} {'running here' if options['inline'] else 'queued'}; directory {run.directory}")
        if options["inline"]:
            from training.supervisor import execute_run

            while execute_run(run.pk) == "waiting":  # an RL run's rollouts are collected by the workers
                time.sleep(5)
        elif options["wait"]:
            while TrainingRun.objects.get(pk=run.pk).status in TrainingRun.ACTIVE:
                time.sleep(2)
        run.refresh_from_db()
        if options["inline"] or options["wait"]:
            self.stdout.write(f"{run}: {run.status}, step {run.progress.get('step')}/{run.progress.get('total_steps')}"
                              f"{', produced ' + run.produced_model.name if run.produced_model else ''}"
                              f"{', ' + run.error[:500] if run.error else ''}")
            if run.status != TrainingRun.Status.DONE:
                raise CommandError(f"{run} {run.status}")
