"""Measure the evaluation systems on the judge-evaluation set, on one of the console's phones:

    python manage.py evaluate_judges --phone sim-0001 [--set v1] [--limit N] [--real-phone] [--blind-share 0.2]

The phone is leased for the run (nothing else acts on it meanwhile). --real-phone and --blind-share
record how the phone answers (a real phone always is one; on the virtual farm, the switches it was
started with); the screen kind of each case is read from the dumps themselves. The result is on the
"Judges vs truth" page.
"""
from django.core.management.base import BaseCommand, CommandError

from devices.leases import LeaseRefused, acquire, kept_alive, release
from devices.models import Device
from devices.phone import PhoneConnection
from flywheel.judging.judge_figures import judge_figures
from flywheel.judging.judge_set import CURRENT_SET, SetInvalid, run_evaluation, start_evaluation


class Command(BaseCommand):
    help = "Replay the judge-evaluation set on a phone and measure Systems A, B, C and HTSC against the truth."

    def add_arguments(self, parser):
        parser.add_argument("--phone", required=True, help="the phone's serial")
        parser.add_argument("--set", default=CURRENT_SET, dest="version")
        parser.add_argument("--limit", type=int, default=None, help="only the first N cases")
        parser.add_argument("--real-phone", action="store_true")
        parser.add_argument("--blind-share", type=float, default=0.0)

    def handle(self, phone, version, limit, real_phone, blind_share, **options):
        device = Device.objects.filter(serial=phone).first()
        if device is None:
            raise CommandError(f"no phone {phone!r} is registered (see the Phones page)")
        try:
            evaluation = start_evaluation(phone, version, real_phone=real_phone, blind_share=blind_share)
        except SetInvalid as error:
            raise CommandError(str(error)) from error
        try:
            lease = acquire(device, f"judge-evaluation:{evaluation.pk}", purpose="judge evaluation")
        except LeaseRefused as error:
            evaluation.delete()
            raise CommandError(f"the phone is not free: {error}") from error
        try:
            with kept_alive(lease):
                run_evaluation(evaluation, PhoneConnection.for_device(device), limit=limit,
                               progress=lambda n, total: self.stdout.write(f"\r{n}/{total}", ending=""))
        finally:
            release(lease)
        figures = judge_figures(evaluation.cases.all())
        self.stdout.write("")
        if evaluation.error:
            self.stdout.write(self.style.ERROR(f"stopped: {evaluation.error}"))
        self.stdout.write(" ".join(f"{k}={'n/a' if v is None else round(v, 4)}" for k, v in figures.items()))
