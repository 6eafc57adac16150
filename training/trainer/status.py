"""status.json, the trainer's word to the web side (see state.py), with the standard library only: so
that a trainer whose imports fail (torch, transformers) still says so there, and why.

Started as `python -m training.trainer.<module>` (torchrun and accelerate start each rank so), the
package installs `report_uncaught` as sys.excepthook before the module's own imports run: an exception
that escapes run_main's handler, an import error above all, ends as status "failed" with its one line.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

MAX_ERROR = 500


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def read_status(output_dir: Path) -> dict:
    try:
        return json.loads((Path(output_dir) / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def write_status(output_dir: Path, state: str, **fields) -> dict:
    status = {"state": state, "step": 0, "total_steps": 0, "error": "", "checkpoint": "",
              **{key: value for key, value in read_status(output_dir).items() if key != "state"}, **fields,
              "updated_at": time.time()}
    _write_atomic(Path(output_dir) / "status.json", json.dumps(status, indent=2, sort_keys=True))
    return status


def one_line(error: BaseException, plain: tuple[type, ...] = ()) -> str:
    """The error as status.json's one line: its message alone for the trainer's own errors (`plain`),
    else prefixed with its type; whitespace runs (a multi-line message) become one space."""
    message = str(error) if isinstance(error, plain) else f"{type(error).__name__}: {error}"
    message = " ".join(message.split()) or type(error).__name__
    return message if len(message) <= MAX_ERROR else message[:MAX_ERROR - 1] + "…"


def config_path(argv: list[str]) -> Path | None:
    """The --config argument of a trainer's command line."""
    for index, argument in enumerate(argv):
        if argument == "--config" and index + 1 < len(argv):
            return Path(argv[index + 1])
        if argument.startswith("--config="):
            return Path(argument.split("=", 1)[1])
    return None


def status_dir(config_file: Path | None, output_dir=None) -> Path | None:
    """Where the run's status goes: the config's output_dir, else the directory of config.json (the
    web side writes it into the run's directory), so that an unreadable config is reported too."""
    if output_dir and isinstance(output_dir, str | os.PathLike):
        return Path(output_dir)
    if config_file is not None and config_file.parent.is_dir():
        return config_file.parent
    return None


def write_failure(argv: list[str], error: BaseException) -> None:
    """status "failed" for a trainer that failed before run_main could say so."""
    config_file = config_path(argv)
    try:
        config = json.loads(config_file.read_text()) if config_file else None
    except (OSError, ValueError):
        config = None
    output_dir = status_dir(config_file, config.get("output_dir") if isinstance(config, dict) else None)
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        write_status(output_dir, "failed", error=one_line(error))


def report_uncaught(kind, error, trace) -> None:
    if issubclass(kind, Exception):
        try:
            write_failure(sys.argv[1:], error)
        except Exception as failure:   # the traceback below still goes to the log
            print(f"status.json could not be written: {failure}", file=sys.stderr)
    sys.__excepthook__(kind, error, trace)


def install_when_started_as_module() -> None:
    """While Python locates the module of `python -m`, sys.argv[0] is "-m" (documented): this package is
    being imported as the parent of the trainer module about to run, before that module's imports."""
    if sys.argv[:1] == ["-m"]:
        sys.excepthook = report_uncaught
