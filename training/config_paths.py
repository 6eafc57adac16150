"""Where a run's configuration may point: model and reference weights and the DeepSpeed file lie under
the configured roots (settings.TRAINING_MODEL_ROOTS, where weights are kept, and settings.TRAINING_ROOT,
where runs save their checkpoints), so a run config cannot make the trainer read (or a later step
overwrite) a file anywhere else on the machine.

A path must be absolute and free of ".." parts; it is compared after normalising ("a//b/./c"). Where
it exists on this machine its links are followed too, so a link inside a root cannot point outside
every root; a path this machine does not have (weights on a trainer's own disk) is judged by name.
"""
import os
from pathlib import PurePosixPath


def configured_roots() -> list[str]:
    from django.conf import settings  # read only when a config names a path: pure callers need no Django

    return [str(root) for root in [*settings.TRAINING_MODEL_ROOTS, settings.TRAINING_ROOT] if str(root)]


def path_problem(path: str, roots: list[str]) -> str:
    """Why `path` may not be used by a run ("" when it may): relative, with "..", or outside every root."""
    if ".." in PurePosixPath(path).parts:
        return f"{path} may not contain '..'"
    if not os.path.isabs(path):
        return f"{path} must be an absolute path under {' or '.join(roots)}"
    if not _under(os.path.normpath(path), [os.path.normpath(root) for root in roots]):
        return (f"{path} is outside the model and artifact roots ({', '.join(roots)}): put it under one of them "
                f"or add its folder to TRAINING_MODEL_ROOTS")
    if os.path.lexists(path) and not _under(os.path.realpath(path), [os.path.realpath(root) for root in roots]):
        return f"{path} links to {os.path.realpath(path)}, outside the model and artifact roots ({', '.join(roots)})"
    return ""


def _under(path: str, roots: list[str]) -> bool:
    return any(os.path.isabs(root) and os.path.commonpath([path, root]) == root for root in roots)


def config_path_problems(config: dict, roots: list[str] | None = None) -> list[tuple[str, str]]:
    """(key, problem) for each path of a run config outside the roots: model.path, reference.path, deepspeed."""
    named = [(f"{key}.path", (config.get(key) or {}).get("path")) for key in ("model", "reference")
             if isinstance(config.get(key), dict)]
    named.append(("deepspeed", config.get("deepspeed")))
    named = [(key, path) for key, path in named if isinstance(path, str) and path]
    if not named:
        return []
    roots = roots if roots is not None else configured_roots()
    return [(key, problem) for key, path in named if (problem := path_problem(path, roots))]
