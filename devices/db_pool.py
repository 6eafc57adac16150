"""A thread's database connection handed back between bursts of writes, where a pool shares them.

With DATABASE_POOL_SIZE set (config/settings.py: Django's psycopg pool), closing a connection
returns it to the process's pool; a phone host's threads then hold one only while they write, not
while their phone acts or their model thinks (seconds), and 100 phones share a few connections.
Without a pool a close would cost a new connection per step, so nothing happens.
"""
from django.db import connection


def pooled() -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def release_connection() -> None:
    """Back to the pool, unless inside a transaction (whose connection must stay) or unpooled."""
    if pooled() and connection.connection is not None and not connection.in_atomic_block:
        connection.close()
