"""The Global Environment Memory (§2.2.5): the graph and its path queries (graph.py), Env_ERROR feedback
(feedback.py), re-checks (recheck.py), their Celery tasks, URLs and pages."""
