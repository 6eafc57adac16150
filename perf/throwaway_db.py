"""A PostgreSQL database a benchmark script makes for one run and drops afterwards (the scripts import it
from their own folder: `python perf/<script>.py` puts perf/ first on the path)."""
from urllib.parse import urlsplit, urlunsplit


def create_database(base: str, name: str) -> str:
    """CREATE DATABASE `name` on the server `base` names; its URL. `name` is the caller's own: digits,
    letters and underscores only."""
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(base)._replace(path=f"/{name}"))


def drop_database(base: str, name: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
