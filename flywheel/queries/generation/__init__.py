"""Query generation over function-tree leaves (§2.2.2–§2.2.5): the planner (planner.py), the offline grammar
(grammar.py) and LLM text (llm.py), runs (runs.py), their Celery task, URLs and pages."""
