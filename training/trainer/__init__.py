"""The trainer: torch + transformers, launched by torchrun/accelerate; no Django (see training/trainer/sft.py)."""
