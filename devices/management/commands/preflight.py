"""`manage.py preflight [--phone-host NAME]`: can this machine take its role? Says what is wrong and
exits non-zero before anything starts, so a role never half-starts."""
from urllib.parse import urlparse

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from devices import hosts


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = url.partition("://")
    credentials, at, location = rest.rpartition("@")
    return f"{scheme}{sep}{credentials.split(':')[0] + ':***@' if at else ''}{location}"


def check_database(require_migrated: bool):
    try:
        connection.ensure_connection()
    except DatabaseError as error:
        raise CommandError(f"The database does not answer ({settings.DATABASES['default'].get('HOST') or 'local'}): "
                           f"{str(error).strip().splitlines()[0]}. Check DATABASE_URL and that this machine "
                           f"may reach it.") from error
    if require_migrated:
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise CommandError("The database is not migrated to this version: run the central role "
                               "(`make central`) or `manage.py migrate` first.")


def check_redis(url: str):
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3).ping()
    except redis.AuthenticationError as error:
        if not urlparse(url).password:
            raise CommandError(f"Redis at {_redact(url)} wants a password: put it in REDIS_URL "
                               f"(redis://:PASSWORD@host:6379/0).") from error
        raise CommandError(f"Redis at {_redact(url)} refused the password. Check REDIS_URL "
                           f"(redis://:PASSWORD@host:6379/0).") from error
    except redis.ResponseError as error:
        if "NOAUTH" in str(error):
            raise CommandError(f"Redis at {_redact(url)} wants a password: put it in REDIS_URL "
                               f"(redis://:PASSWORD@host:6379/0).") from error
        raise CommandError(f"Redis at {_redact(url)}: {error}") from error
    except (redis.ConnectionError, redis.TimeoutError, OSError) as error:
        raise CommandError(f"Redis at {_redact(url)} does not answer: {error}. Check REDIS_URL and that "
                           f"this machine may reach it.") from error


class Command(BaseCommand):
    help = "Check the database, Redis and (for a phone host) that no live host has its name; exit 1 if not."

    def add_arguments(self, parser):
        parser.add_argument("--phone-host", default="", help="the name this phone host will serve")
        parser.add_argument("--no-migration-check", action="store_true",
                            help="the central role migrates right after; do not require it done")

    def handle(self, *args, phone_host="", no_migration_check=False, **options):
        check_database(require_migrated=not no_migration_check)
        check_redis(settings.REDIS_URL)
        if settings.CELERY_BROKER_URL != settings.REDIS_URL:
            check_redis(settings.CELERY_BROKER_URL)
        if phone_host:
            row = hosts.live_hosts().filter(name=phone_host).first()
            if row and not hosts.same_machine_dead_worker(row):
                raise CommandError(
                    f"Phone host {phone_host!r} is already served by the worker {row.instance} on {row.machine}. "
                    f"Two machines must not claim the same ADB server: give this one its own PHONE_HOST_NAME, "
                    f"or stop the other.", returncode=3)  # as the worker's own refusal: no point restarting
        self.stdout.write(f"preflight: database, Redis{' and phone host ' + phone_host if phone_host else ''} ok")
