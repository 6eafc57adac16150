"""First-run content: the built-in offline policy and, when given, a task set and setup recipes.
Safe to rerun (recipes are replaced by key).

The task set is named by the caller (`make up` passes the virtual farm's own file when it starts
the farm): the product never knows where a test bed keeps its tasks.
"""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from flywheel.models import Query
from flywheel.policies import default_policy_version
from flywheel.queries.jsonl import QueryImportError, import_queries
from flywheel.queries.recipes import RecipesInvalid, import_recipes


class Command(BaseCommand):
    help = "Register the offline policy; import the given task set(s) when no queries exist yet."

    def add_arguments(self, parser):
        parser.add_argument("--tasks", action="append", default=[], metavar="FILE.jsonl",
                            help="a query file to import on an empty database (repeatable)")
        parser.add_argument("--recipes", action="append", default=[], metavar="FILE.jsonl",
                            help="setup recipes of prerequisites to import or replace (repeatable)")

    def handle(self, *args, tasks, recipes, **options):
        default_policy_version()
        for name in recipes:
            try:
                result = import_recipes(Path(name).read_text(encoding="utf-8"))
            except (OSError, RecipesInvalid) as error:
                raise CommandError(f"{name}: setup recipes not imported: {error}") from None
            self.stdout.write(f"Setup recipes: {result['created']} new, {result['updated']} replaced from {Path(name).name}")
        if Query.objects.exists():
            self.stdout.write(f"Queries: {Query.objects.count()} in the database.")
            return
        for name in tasks:
            path = Path(name)
            if not path.is_file():
                raise CommandError(f"{path}: no such task file")
            try:
                result = import_queries(path.read_text(encoding="utf-8"))
            except QueryImportError as error:
                self.stderr.write(f"{path}: not imported: {error}")
                continue
            self.stdout.write(f"Queries: imported {result['total']} from {path.name}")
        if not tasks:
            self.stdout.write("Queries: none yet; import some on /queries/import/.")
