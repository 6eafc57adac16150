"""`python manage.py import_recipes FILE`: setup recipes that meet queries' prerequisites (JSONL)."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from flywheel.queries.recipes import RecipesInvalid, import_recipes


class Command(BaseCommand):
    help = "Import setup recipes (key, label, phrases, account, apps, steps), all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("path", help="a .jsonl file, one recipe per line")

    def handle(self, *args, path, **options):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
        try:
            result = import_recipes(text)
        except RecipesInvalid as error:
            raise CommandError("nothing imported:\n  " + "\n  ".join(error.problems)) from None
        self.stdout.write(self.style.SUCCESS(f"Setup recipes: {result['created']} new, {result['updated']} replaced"))
