"""Train a step reward model (issue #39) from the shell, through the same service as the page:

    manage.py train_reward_model prm-1              # queued on the training workers
    manage.py train_reward_model prm-1 --inline     # trained here; prints its held-out figures
    manage.py train_reward_model --measure          # no model version: the held-out accuracy only
"""
from django.core.management.base import BaseCommand, CommandError

from training.reward_model import (
    RewardModelError,
    launch_reward_model_training,
    metrics_of,
    prm_step_accuracy,
    status_of,
    train_reward_model,
)


class Command(BaseCommand):
    help = "Train a step reward model on the judged steps of the pools."

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", default="", help="the new model version's name")
        parser.add_argument("--seed", type=int, default=0, help="the held-out split's and the trainer's seed")
        parser.add_argument("--inline", action="store_true", help="train here instead of on the training queue")
        parser.add_argument("--measure", action="store_true", help="train in a scratch directory and print the "
                                                                   "held-out step accuracy (no model version)")

    def handle(self, *args, **options):
        if options["measure"]:
            try:
                accuracy = prm_step_accuracy(seed=options["seed"])
            except RewardModelError as error:
                raise CommandError(str(error))
            self.stdout.write(f"prm_step_accuracy={'none' if accuracy is None else f'{accuracy:.4f}'}")
            return
        try:
            version = launch_reward_model_training(options["name"], seed=options["seed"], launch=not options["inline"])
        except ValueError as error:
            raise CommandError(f"not launched: {error}")
        if not options["inline"]:
            self.stdout.write(f"{version.name} queued on the training workers; directory {version.artifact}")
            return
        state = train_reward_model(version.pk)
        if state != "done":
            raise CommandError(f"{version.name}: {state}: {status_of(version).get('error', '')}")
        held = metrics_of(version).get("held_out") or {}
        self.stdout.write(f"{version.name}: trained; held-out steps {held.get('steps')}, accuracy {held.get('accuracy')}, "
                          f"coverage of the band {held.get('coverage')}")
