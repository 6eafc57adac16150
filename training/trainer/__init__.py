"""The trainer: torch + transformers, launched by torchrun/accelerate; no Django (see training/trainer/sft.py)."""
from training.trainer.status import install_when_started_as_module

install_when_started_as_module()   # a failed import of torch or transformers still ends in status.json
