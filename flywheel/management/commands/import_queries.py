from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from flywheel.queries.jsonl import QueryImportError, import_queries


class Command(BaseCommand):
    help = "Import queries from a JSONL file (docs/query-format.md); any bad line imports nothing."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file, **options):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {file}: {error}")
        try:
            result = import_queries(text)
        except QueryImportError as error:
            for problem in error.problems:
                self.stderr.write(f"{file}:{problem}")
            raise CommandError(f"{len(error.problems)} problem(s); nothing was imported")
        self.stdout.write(self.style.SUCCESS(
            f"Imported {result['total']} queries ({result['created']} new, {result['updated']} updated)"))
