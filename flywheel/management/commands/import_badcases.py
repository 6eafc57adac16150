"""`python manage.py import_badcases FILE`: failed real-user cases (JSONL or CSV) to the RL pool's
Phase-1 gate (§2.4.3). A file with any bad case imports nothing."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from flywheel.pools.badcase import FORMAT_HELP, BadCasesInvalid, import_cases, parse_cases


class Command(BaseCommand):
    help = "Import BadCases (goal, apps, notes) as queries that wait for the current policy's measurement. " + FORMAT_HELP

    def add_arguments(self, parser):
        parser.add_argument("path", help="a .jsonl or .csv file of cases")

    def handle(self, *args, path, **options):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
        try:
            result = import_cases(parse_cases(text, path))
        except BadCasesInvalid as error:
            raise CommandError("nothing imported:\n  " + "\n  ".join(error.problems)) from None
        self.stdout.write(self.style.SUCCESS(
            f"BadCases: {result['created']} new, {result['existing']} already known; {result['measuring']} await "
            "the current policy's measurement before the Phase-1 gate"))
