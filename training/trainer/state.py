"""The trainer's files in output_dir — the contract with the web side (training/supervisor.py reads them):

  status.json        {"state": running|done|cancelled|failed, "step", "total_steps", "error", "checkpoint", ...}
  metrics.jsonl      one JSON line per optimizer step
  checkpoint-<step>/ save_pretrained model + processor, and trainer_state.pt (optimizer, scheduler,
                     step, RNG, data position); written under a temporary name and renamed, so a
                     run killed while saving never leaves a half checkpoint behind
  final/             the artifact (save_pretrained)
  CANCEL             written by the web side: the trainer saves a checkpoint and stops (state cancelled)

Also the process plumbing every entry point shares: torch.distributed setup, the cancel flag (the
CANCEL file or SIGTERM, agreed on by all ranks), and the error → status "failed" wrapper.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from training.trainer.status import _write_atomic, one_line, read_status, status_dir, write_status

__all__ = ["read_status", "write_status"]   # part of this module's contract (tests and the trainers import them here)
CHECKPOINT_PREFIX = "checkpoint-"
KEEP_CHECKPOINTS = 2
TRAINER_STATE = "trainer_state.pt"


class TrainerError(RuntimeError):
    """A run that cannot go on; the message is what status.json's "error" says."""


# -- status and metrics (status.json itself: status.py, which needs no torch) ------------------------

def append_metrics(output_dir: Path, record: dict) -> None:
    with open(Path(output_dir) / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def read_metrics(output_dir: Path) -> list[dict]:
    path = Path(output_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trim_metrics(output_dir: Path, last_step: int) -> None:
    """Drop the lines of steps after the checkpoint a resumed run starts from (they are redone)."""
    path = Path(output_dir) / "metrics.jsonl"
    if path.exists():
        kept = [line for line in path.read_text().splitlines()
                if line.strip() and _step_of(line) is not None and _step_of(line) <= last_step]
        _write_atomic(path, "".join(line + "\n" for line in kept))


def _step_of(line: str):
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None   # a line cut by a kill


# -- checkpoints -----------------------------------------------------------------------------------

def checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for path in Path(output_dir).glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = path.name[len(CHECKPOINT_PREFIX):]
        if suffix.isdigit() and (path / TRAINER_STATE).is_file():
            found.append((int(suffix), path))
    return sorted(found)


def latest_checkpoint(output_dir: Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1][1] if found else None


def save_checkpoint(output_dir: Path, step: int, write_model, trainer_state: dict,
                    keep: int = KEEP_CHECKPOINTS) -> Path:
    """checkpoint-<step>/: `write_model(directory)` saves the weights and processor; trainer_state.pt
    the rest. The last `keep` checkpoints stay."""
    output_dir = Path(output_dir)
    final = output_dir / f"{CHECKPOINT_PREFIX}{step}"
    temporary = output_dir / f".{CHECKPOINT_PREFIX}{step}.partial"
    shutil.rmtree(temporary, ignore_errors=True)
    write_model(temporary)
    torch.save(trainer_state, temporary / TRAINER_STATE)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(temporary, final)
    for _, old in checkpoints(output_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_trainer_state(checkpoint: Path) -> dict:
    return torch.load(Path(checkpoint) / TRAINER_STATE, map_location="cpu", weights_only=False)


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


# -- processes -------------------------------------------------------------------------------------

class Distributed:
    """Rank, world size and device of this process; torch.distributed is set up when torchrun or
    accelerate started several (gloo on CPU, nccl on GPU)."""

    def __init__(self):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        if self.world_size > 1 and not dist.is_initialized():
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(backend, timeout=timedelta(minutes=30))

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def sum(self, value: float) -> float:
        if not self.enabled:
            return float(value)
        tensor = torch.tensor([float(value)], dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return float(tensor.item())

    def any(self, flag: bool) -> bool:
        return self.sum(1.0 if flag else 0.0) > 0

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


class CancelWatch:
    """A cancel asked for by the CANCEL file (the web side) or SIGTERM (a launcher, the supervisor)."""

    def __init__(self, output_dir: Path):
        self.path = Path(output_dir) / "CANCEL"
        self.signalled = False
        try:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:
            pass   # not the main thread (run in-process by a host that owns its signals): the file still works

    def _on_sigterm(self, signum, frame):
        self.signalled = True

    def requested(self) -> bool:
        return self.signalled or self.path.exists()

    def consume(self) -> None:
        """The cancel was honoured: remove the file so that resuming the run later does not stop again."""
        try:
            self.path.rename(self.path.with_name("CANCEL.done"))
        except OSError:
            pass


def run_main(output_dir_of, body, argv=None) -> int:
    """Run `body(config)` with errors written to status.json as "failed" (exit code 1)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="the run's config.json")
    args = parser.parse_args(argv)
    output_dir, sigterm, started = None, signal.getsignal(signal.SIGTERM), time.time()
    try:
        # An unreadable config still gets its status: in the directory of config.json (the run's).
        output_dir = status_dir(Path(args.config))
        config = json.loads(Path(args.config).read_text())
        if not isinstance(config, dict):
            raise TrainerError(f"the config {args.config} is not a JSON object")
        output_dir = status_dir(Path(args.config), config.get("output_dir") and output_dir_of(config))
        output_dir.mkdir(parents=True, exist_ok=True)
        return body(config)
    except Exception as error:
        traceback.print_exc()
        message = one_line(error, plain=(TrainerError,))
        earlier = read_status(output_dir) if output_dir is not None else {}
        # Under torchrun the rank that failed first says why; the others then fail on the lost peer.
        first = earlier.get("state") == "failed" and earlier.get("updated_at", 0) >= started and earlier.get("error")
        if output_dir is not None and not first:
            write_status(output_dir, "failed", error=message[:5000])
        print(f"training failed: {message}", file=sys.stderr)
        return 1
    finally:
        try:
            signal.signal(signal.SIGTERM, sigterm)   # called in-process (tests), leave the host's handler as it was
        except (ValueError, TypeError):
            pass
