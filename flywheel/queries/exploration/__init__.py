"""App exploration (§2.2.5): the explorer (explorer.py) and its steps out of the app (cross.py), what it taps
(rules.py), its writes (store.py), runs (runs.py), their Celery tasks, URLs and pages."""
