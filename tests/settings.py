"""The test session's settings: the project's own, with this session's Redis key prefix and a media
folder of its own under the system's temporary directory (not the checkout).

Both go into the environment before config.settings reads it, so every process a test starts (a
worker, the web server, the farm) inherits the same values through process_env()."""
import os
import tempfile

# Made by the first write (a run that only collects leaves nothing), removed after the session.
os.environ.setdefault("FLYWHEEL_KEY_PREFIX", f"test{os.getpid()}:")
os.environ.setdefault("MEDIA_ROOT", os.path.join(tempfile.gettempdir(), f"flywheel-test-media-{os.getpid()}"))
# pytest-xdist's workers inherit the session's environment: each keeps its own keys and media.
worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker and not os.environ["FLYWHEEL_KEY_PREFIX"].endswith(f"-{worker}:"):
    os.environ["FLYWHEEL_KEY_PREFIX"] = os.environ["FLYWHEEL_KEY_PREFIX"].rstrip(":") + f"-{worker}:"
    os.environ["MEDIA_ROOT"] += f"-{worker}"

from config.settings import *  # noqa: E402, F403
