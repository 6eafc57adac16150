import sys

from django.core.management.base import BaseCommand

from flywheel.models import Query
from flywheel.queries.jsonl import export_queries


class Command(BaseCommand):
    help = "Write every query as JSONL (the import format) to FILE or standard output."

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", default="-")

    def handle(self, *args, file, **options):
        out = sys.stdout if file == "-" else open(file, "w", encoding="utf-8")
        try:
            for line in export_queries(Query.objects.all()):
                out.write(line)
        finally:
            if out is not sys.stdout:
                out.close()
