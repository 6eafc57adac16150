"""The test session's settings: the project's own, with this session's Redis key prefix and a media
folder of its own under the system's temporary directory (not the checkout).

Both go into the environment before config.settings reads it, so every process a test starts (a
worker, the web server, the farm) inherits the same values through process_env()."""
import os
import tempfile

# Made by the first write (a run that only collects leaves nothing), removed after the session.
os.environ.setdefault("FLYWHEEL_KEY_PREFIX", f"test{os.getpid()}:")
os.environ.setdefault("MEDIA_ROOT", os.path.join(tempfile.gettempdir(), f"flywheel-test-media-{os.getpid()}"))
# BLAS on one thread: pytest-xdist already keeps every core busy (gate 3's embeddings ran 6 s instead of
# 9 s for 480 texts on the 2-core machine); set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# pytest-xdist's workers inherit the session's environment: each keeps its own keys and media.
worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker and not os.environ["FLYWHEEL_KEY_PREFIX"].endswith(f"-{worker}:"):
    os.environ["FLYWHEEL_KEY_PREFIX"] = os.environ["FLYWHEEL_KEY_PREFIX"].rstrip(":") + f"-{worker}:"
    os.environ["MEDIA_ROOT"] += f"-{worker}"

from config.settings import *  # noqa: E402, F403

# Users are made with a password in many tests (tests/conftest.py, role_users: five per test): the
# fast hasher, not PBKDF2's deliberate slowness (about 0.4 s a user on two busy CPUs).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
