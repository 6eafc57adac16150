"""Celery tasks (to be written)."""
__all__ = []
