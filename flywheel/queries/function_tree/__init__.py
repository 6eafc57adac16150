"""Function trees per app (§2.2.1): built from the GEM (builder.py), edited on the pruning page (edit.py),
named (labels.py), or extracted by a VLM (vlm.py)."""
