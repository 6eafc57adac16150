"""The trainer under transformers 5 as well as the pinned 4.x (requirements-training.txt): transformers
5 goes once into var/transformers5 (pip --target, with only those of its requirements that the
virtual environment does not already satisfy: huggingface_hub 1+, tokenizers, ...), and a process with
that folder first on its PYTHONPATH builds the tiny Qwen2.5-VL, trains 3 SFT steps through the
trainer's entry point, saves, reloads and compares, and serves the checkpoint with the built-in model
server (tests/training/transformers5_roundtrip.py).
The folder is kept, so a rerun skips the install; delete it to take the newest 5.x. Without PyPI the
test is skipped, unless CI is set: there it fails."""
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, PathDistribution, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT
from tests.training.test_trainer_sft import make_export, trainer_env

pytestmark = pytest.mark.usefixtures("torch")  # trains with torch: the slow tier

TARGET = ROOT / "var" / "transformers5"
SPEC = "transformers>=5,<6"


def pip_target(target: Path, requirements: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                             "--no-deps", "--target", str(target), *requirements],
                            capture_output=True, text=True, timeout=600)
    if result.returncode:
        errors = [line for line in result.stderr.splitlines() if "is ignored" not in line]
        raise OSError(f"pip install {' '.join(requirements)}: " + " ".join(errors[-3:]))


def unmet(target: Path) -> list[str]:
    """The requirements of the packages in `target` that neither `target` nor this environment meets."""
    ours = {canonicalize_name(PathDistribution(info).metadata["Name"]): PathDistribution(info)
            for info in target.glob("*.dist-info")}
    missing = set()
    for package in ours.values():
        for text in package.requires or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue   # an extra, or another platform's
            name = canonicalize_name(requirement.name)
            try:
                have = ours[name].version if name in ours else distribution(requirement.name).version
            except PackageNotFoundError:
                have = None
            if have is None or not requirement.specifier.contains(have, prereleases=True):
                missing.add(f"{requirement.name}{requirement.specifier}")
    return sorted(missing)


def install_transformers5() -> Path:
    """var/transformers5 with transformers 5 and what it needs beyond this environment (once)."""
    if (TARGET / "INSTALLED").is_file():
        return TARGET
    building = TARGET.with_name(f".transformers5.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    pip_target(building, [SPEC])
    for _ in range(10):   # each round adds the requirements of the previous one's packages
        missing = unmet(building)
        if not missing:
            break
        pip_target(building, missing)
    else:
        raise OSError(f"the requirements of {SPEC} did not settle: {missing}")
    (building / "INSTALLED").write_text(json.dumps(sorted(info.name for info in building.glob("*.dist-info"))))
    shutil.rmtree(TARGET, ignore_errors=True)
    building.rename(TARGET)
    return TARGET


@pytest.fixture(scope="module")
def transformers5():
    try:
        return install_transformers5()
    except (OSError, subprocess.TimeoutExpired) as error:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"transformers 5 could not be installed from PyPI: {error}")
        pytest.skip(f"transformers 5 could not be installed (is PyPI reachable from here?): {error}")


def test_the_tiny_model_trains_saves_and_reloads_under_transformers5(transformers5, tmp_path):
    snapshot = make_export(tmp_path / "snapshot", count=4, small=True)
    env = dict(trainer_env(), PYTHONPATH=f"{transformers5}{os.pathsep}{ROOT}")
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "training" / "transformers5_roundtrip.py"),
                             str(snapshot), str(tmp_path / "work")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, (result.stdout + result.stderr)[-4000:]
    found = json.loads(lines[-1][len("RESULT "):])
    assert int(found["transformers"].split(".")[0]) == 5
    assert (found["exit_code"], found["state"], found["step"], found["error"]) == (0, "done", 3, ""), found
    assert found["reloaded_logits_equal"] and found["checkpoint_logits_equal_final"], found
    assert found["trained_differs_from_fresh"], found
    assert found["pixel_values_equal"] and found["image_processor_classes"] == ["Qwen2VLImageProcessorPil"], found
    served = found["served"]
    assert served.get("status") == 200 and served["content_is_text"], served
    assert served["logprobs"] == served["completion_tokens"] >= 1, served
