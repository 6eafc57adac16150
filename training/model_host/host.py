"""The model host: claims checkpoint versions that need serving, serves them, keeps them served.

A version *needs serving* when it is a trained checkpoint (an artifact, kind checkpoint, or an endpoint a
model host registered whose host fell silent), it is *wanted* (an active run uses it, or it is among
the newest MODEL_HOST_KEEP_WARM checkpoints) and no host holds it (no Serving row that is failed, or
active with a recent heartbeat). Claiming locks the version row (select_for_update, skip_locked) and
re-reads its Serving row, so two hosts never serve the same version.

Each served version is one server process: vLLM (the recipe's command) where vLLM and a GPU are here,
else the built-in server (server.py). Once it answers, `serving.register_endpoint` makes the version an
endpoint every line can use. A server that dies is started again after a backoff (1 s doubling to 60 s);
one that exits before it ever answered means the checkpoint cannot load: the version is marked failed
with the loader's reason and never tried again. A version nobody wants any more is stopped and is a
plain checkpoint again.
"""
from __future__ import annotations

import importlib.util
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from flywheel.model_endpoints import MODEL_HOST
from flywheel.models import ModelVersion
from flywheel.policies import check_endpoint_health
from training import serving
from training.models import Serving

log = logging.getLogger(__name__)

ACTIVE_RUN_STATES = ("queued", "running", "paused")
MAX_BACKOFF_S = 60.0
STEADY_AFTER_S = 60.0  # a server up this long has its backoff reset
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def managed_versions():
    """Trained checkpoints a model host may serve (an endpoint registered by hand is the operator's)."""
    return ModelVersion.objects.exclude(artifact="").filter(
        Q(kind=ModelVersion.Kind.CHECKPOINT)
        | Q(kind=ModelVersion.Kind.ENDPOINT, serving__state__in=Serving.ACTIVE))


def in_use_ids() -> set[int]:
    """Versions an active run refers to: any model with a `status` that points at ModelVersion
    (collection and benchmark runs, training runs from a base), so a new kind of run counts too."""
    ids: set[int] = set()
    for relation in ModelVersion._meta.related_objects:
        model = relation.related_model
        if not relation.one_to_many or "status" not in {field.name for field in model._meta.concrete_fields}:
            continue
        field = relation.field.name
        ids |= set(model.objects.filter(status__in=ACTIVE_RUN_STATES, **{f"{field}__isnull": False})
                   .values_list(field, flat=True))
    return ids


def wanted_ids(keep_warm: int | None = None) -> set[int]:
    """In use, asked for on its page (until the hold ends), or among the newest checkpoints."""
    keep_warm = settings.MODEL_HOST_KEEP_WARM if keep_warm is None else keep_warm
    warm = list(managed_versions().exclude(serving__state=Serving.State.FAILED)
                .order_by("-created_at", "-pk").values_list("pk", flat=True)[:max(0, keep_warm)])
    asked = Serving.objects.filter(wanted_until__gt=timezone.now()).exclude(state=Serving.State.FAILED)
    return in_use_ids() | set(warm) | set(asked.values_list("version_id", flat=True))


def _stale_before():
    return timezone.now() - timedelta(seconds=settings.MODEL_HOST_STALE_S)


def _held(row: Serving | None) -> bool:
    """The row keeps the version from being claimed: failed, or active with a live host."""
    if row is None:
        return False
    if row.state == Serving.State.FAILED:
        return True
    return row.state in Serving.ACTIVE and row.heartbeat_at is not None and row.heartbeat_at >= _stale_before()


def needs_serving(keep_warm: int | None = None):
    held = Serving.objects.filter(version=OuterRef("pk")).filter(
        Q(state=Serving.State.FAILED) | Q(state__in=Serving.ACTIVE, heartbeat_at__gte=_stale_before()))
    return (managed_versions().filter(pk__in=wanted_ids(keep_warm)).exclude(Exists(held))
            .exclude(kind=ModelVersion.Kind.ENDPOINT, health__has_key="ok", health__ok=True))


def claim(host: str, limit: int, keep_warm: int | None = None) -> list[Serving]:
    """Up to `limit` versions that need serving, claimed for `host` in one transaction."""
    if limit <= 0:
        return []
    claimed = []
    with transaction.atomic():
        # What a run uses first, then what someone asked for (the latest ask first), then the newest.
        priority = Case(When(pk__in=in_use_ids(), then=Value(0)),
                        When(serving__wanted_until__gt=timezone.now(), then=Value(1)), default=Value(2))
        versions = list(needs_serving(keep_warm).select_for_update(skip_locked=True, of=("self",))
                        .order_by(priority, F("serving__wanted_until").desc(nulls_last=True), "-created_at",
                                  "-pk")[:limit])
        for version in versions:
            # Read again under the lock: another host may have claimed it after our query's snapshot.
            row = Serving.objects.select_for_update().filter(version=version).first()
            if _held(row):
                continue
            now = timezone.now()
            values = dict(state=Serving.State.CLAIMED, host=host, engine="", port=None, pid=None, log_path="",
                          error="", restarts=0, restart_at=None, heartbeat_at=now, claimed_at=now,
                          serving_since=None)
            row, _ = Serving.objects.update_or_create(version=version, defaults=values)
            claimed.append(row)
    return claimed


def unserve(version_id: int, url: str) -> None:
    """The version is a plain checkpoint again (its endpoint was ours and is gone)."""
    ModelVersion.objects.filter(pk=version_id, kind=ModelVersion.Kind.ENDPOINT, endpoint_url=url).update(
        kind=ModelVersion.Kind.CHECKPOINT, endpoint_url="", served_model_name="", health={}, health_checked_at=None)


def request_serving(version: ModelVersion) -> Serving:
    """Someone wants this checkpoint served now (to launch a run on it): a host serves it for
    MODEL_HOST_REQUEST_HOLD_S, longer while a run uses it. A failed one is tried again."""
    if not version.artifact:
        raise ValueError(f"{version.name} has no checkpoint folder to serve")
    # A host serving it re-points its endpoint: only a trained checkpoint, or one a host served
    # before, never a version an admin registered where it is served (the judges', the Teacher's).
    if version.kind != ModelVersion.Kind.CHECKPOINT and not Serving.objects.filter(version=version).exists():
        raise ValueError(f"{version.name} is served where an admin registered it; only an admin changes that")
    until = timezone.now() + timedelta(seconds=settings.MODEL_HOST_REQUEST_HOLD_S)
    with transaction.atomic():
        row = Serving.objects.select_for_update().filter(version=version).first()
        if row is None:
            return Serving.objects.create(version=version, state=Serving.State.STOPPED, wanted_until=until)
        row.wanted_until = until
        if row.state == Serving.State.FAILED:
            row.state, row.error, row.host = Serving.State.STOPPED, "", ""
        row.save(update_fields=["wanted_until", "state", "error", "host", "updated_at"])
        return row


def _die_with_parent():  # pragma: no cover - runs in the child between fork and exec
    """A server outlives no host: the kernel sends it SIGTERM when its host process ends."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def vllm_available() -> bool:
    return not vllm_missing()


def vllm_missing() -> str:
    """What keeps vLLM from serving here ("" when nothing does)."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed here"
    if shutil.which("nvidia-smi") is None:
        return "this machine has no NVIDIA GPU (nvidia-smi is not found)"
    return ""


class ModelHost:
    def __init__(self, name: str = "", *, address: str = "", first_port: int | None = None,
                 max_servers: int | None = None, keep_warm: int | None = None, engine: str = "",
                 device: str = "", log_dir: Path | None = None, start_timeout_s: float | None = None):
        self.name = name or settings.MODEL_HOST_NAME or socket.gethostname()
        self.address = address or settings.MODEL_HOST_ADDRESS
        self.first_port = first_port or settings.MODEL_HOST_PORT
        self.max_servers = settings.MODEL_HOST_MAX_SERVERS if max_servers is None else max_servers
        self.keep_warm = keep_warm
        self.engine = engine or settings.MODEL_HOST_ENGINE
        self.device = device or settings.MODEL_HOST_DEVICE
        self.start_timeout_s = start_timeout_s or settings.MODEL_HOST_START_TIMEOUT_S
        self.log_dir = Path(log_dir or Path(settings.TRAINING_ROOT) / "model-host")
        self.processes: dict[int, subprocess.Popen] = {}   # Serving pk → its server
        self.started: dict[int, float] = {}                # Serving pk → when its server started (monotonic)
        self.deaths: dict[int, int] = {}                   # Serving pk → deaths since it last ran steadily

    # --- the loop -------------------------------------------------------------------------------------
    def begin(self):
        """A host that starts again holds nothing: rows left active under its name are released
        (their servers ended with the old process)."""
        for row in Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE):
            self._release(row, Serving.State.STOPPED)

    def tick(self):
        Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE).update(heartbeat_at=timezone.now())
        rows = list(Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE).select_related("version"))
        for pk in set(self.processes) - {row.pk for row in rows}:   # its version was deleted or taken over
            self._terminate(pk)
        for row in rows:
            self._tend(row)
        wanted = wanted_ids(self.keep_warm)
        for row in Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE).exclude(version_id__in=wanted):
            self.stop(row)
        active = Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE).count()
        if active >= self.max_servers and self.make_room():
            active -= 1
        for row in claim(self.name, self.max_servers - active, self.keep_warm):
            log.info("claimed %s", row.version)
            self._start(row)

    def make_room(self) -> bool:
        """Every server slot is taken and a version that a run uses, or that someone asked for more
        recently, waits: the least wanted served version no run uses is stopped (one per round), so a
        loop never stalls behind a checkpoint merely kept warm or asked for long ago."""
        pending = list(needs_serving(self.keep_warm).values_list("pk", "serving__wanted_until"))
        if not pending:
            return False
        in_use = in_use_ids()
        served = (Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE).exclude(version_id__in=in_use)
                  .order_by(F("wanted_until").asc(nulls_first=True), "version__created_at", "pk"))
        victim = served.first()
        if victim is None:
            return False
        urgent = any(pk in in_use for pk, _ in pending)
        asked_later = any(until is not None and (victim.wanted_until is None or until > victim.wanted_until)
                          for _, until in pending)
        if not (urgent or asked_later):
            return False
        log.info("making room: %s gives its server up for a version that is needed", victim.version)
        self.stop(victim)
        return True

    def shutdown(self):
        for row in Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE):
            self.stop(row)
        for pk in list(self.processes):
            self._terminate(pk)

    # --- one server -----------------------------------------------------------------------------------
    def engine_for(self) -> str:
        if self.engine in (Serving.Engine.VLLM, Serving.Engine.BUILTIN):
            return self.engine
        return Serving.Engine.VLLM if vllm_available() else Serving.Engine.BUILTIN

    def bind_address(self) -> str:
        return "127.0.0.1" if self.address in LOOPBACK else "0.0.0.0"

    def url(self, row: Serving) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{row.port}/v1"

    def command(self, version: ModelVersion, engine: str, port: int, error_file: Path) -> list[str]:
        if engine == Serving.Engine.VLLM:
            argv = serving.vllm_command(version, port=port)
            local = Path(sys.executable).with_name("vllm")
            return [str(local) if local.exists() else argv[0], *argv[1:]]
        return [sys.executable, "-m", "training.model_host.server", "--model", version.artifact,
                "--served-model-name", serving.served_name(version), "--host", self.bind_address(),
                "--port", str(port), "--device", self.device, "--error-file", str(error_file)]

    def _free_port(self, own: int | None = None) -> int:
        """A port to listen on; a restarted server keeps its own (the registered URL stays right)."""
        taken = set(Serving.objects.filter(host=self.name, state__in=Serving.ACTIVE, port__isnull=False)
                    .values_list("port", flat=True)) - {own}
        for port in ([own] if own else []) + list(range(self.first_port, self.first_port + 1000)):
            if port in taken:
                continue
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((self.bind_address(), port))
                except OSError:
                    continue
            return port
        raise OSError(f"no free port from {self.first_port}")

    def _files(self, row: Serving) -> tuple[Path, Path]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return self.log_dir / f"version-{row.version_id}.log", self.log_dir / f"version-{row.version_id}.error"

    def _start(self, row: Serving):
        log_path, error_file = self._files(row)
        error_file.unlink(missing_ok=True)
        engine = self.engine_for()
        if engine == Serving.Engine.VLLM and not vllm_available():
            self._fail(row, f"model host {self.name} is set to serve with vLLM (MODEL_HOST_ENGINE=vllm) but "
                            f"{vllm_missing()}; run this host on a GPU machine with vLLM installed, or set "
                            "MODEL_HOST_ENGINE=auto to use the built-in server, then use Serve again")
            return
        try:
            port = self._free_port(row.port)
            argv = self.command(row.version, engine, port, error_file)
            with open(log_path, "ab") as log_file:
                process = subprocess.Popen(argv, cwd=settings.BASE_DIR, stdout=log_file, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        except (OSError, ValueError) as error:
            self._fail(row, f"its server could not be started: {error}")
            return
        self.processes[row.pk], self.started[row.pk] = process, time.monotonic()
        Serving.objects.filter(pk=row.pk).update(state=Serving.State.STARTING, engine=engine, port=port,
                                                 pid=process.pid, log_path=str(log_path), restart_at=None)
        row.state, row.engine, row.port, row.pid, row.log_path = Serving.State.STARTING, engine, port, process.pid, str(log_path)
        log.info("started %s (%s, port %s, pid %s)", row.version, engine, port, process.pid)

    def _tend(self, row: Serving):
        process = self.processes.get(row.pk)
        if process is None:
            due = row.restart_at is None or row.restart_at <= timezone.now()
            if row.state in (Serving.State.CLAIMED, Serving.State.STARTING) and due:
                self._start(row)
            return
        code = process.poll()
        if code is None:
            up_s = time.monotonic() - self.started[row.pk]
            if row.state == Serving.State.STARTING:
                if self._answers(row):
                    self._register(row)
                elif up_s > self.start_timeout_s:
                    self._terminate(row.pk)
                    self._fail(row, f"its server did not answer within {self.start_timeout_s:.0f} s")
            elif up_s >= STEADY_AFTER_S:
                self.deaths.pop(row.pk, None)
            return
        self.processes.pop(row.pk, None)
        deaths = self.deaths[row.pk] = self.deaths.get(row.pk, 0) + 1
        never_served = row.serving_since is None
        if never_served or (row.state == Serving.State.STARTING and deaths > settings.MODEL_HOST_MAX_RESTARTS):
            self._fail(row, self._exit_reason(row, code))
            return
        delay = min(MAX_BACKOFF_S, 2.0 ** (deaths - 1))
        log.warning("the server of %s exited (code %s); restarting in %.0f s", row.version, code, delay)
        with transaction.atomic():
            Serving.objects.filter(pk=row.pk).update(
                state=Serving.State.STARTING, pid=None, restarts=row.restarts + 1,
                restart_at=timezone.now() + timedelta(seconds=delay))
            ModelVersion.objects.filter(pk=row.version_id).update(
                health={"ok": False, "error": f"its server stopped (exit code {code}); the model host starts it again"},
                health_checked_at=timezone.now())

    def _answers(self, row: Serving) -> bool:
        return bool(check_endpoint_health(self.url(row), timeout=2.0, model=serving.served_name(row.version)).get("ok"))

    def _register(self, row: Serving):
        try:
            version = serving.register_endpoint(row.version, self.url(row), serving.served_name(row.version),
                                                by=MODEL_HOST)
        except ValidationError as error:
            self._terminate(row.pk)
            self._fail(row, "its endpoint was refused: " + "; ".join(error.messages))
            return
        now = timezone.now()
        Serving.objects.filter(pk=row.pk).update(state=Serving.State.SERVING, serving_since=now, restart_at=None,
                                                 first_served_at=Coalesce("first_served_at", Value(now)))
        log.info("serving %s at %s (health %s)", version, version.endpoint_url, version.health.get("ok"))

    def _exit_reason(self, row: Serving, code: int) -> str:
        """The loader's own words: the built-in server's error file, else the last line of its log."""
        log_path, error_file = self._files(row)
        if error_file.is_file() and error_file.read_text().strip():
            return error_file.read_text().strip()
        try:
            lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        return (lines[-1][:1000] if lines else "") or f"its server exited with code {code} before answering"

    def _terminate(self, pk: int):
        process = self.processes.pop(pk, None)
        self.started.pop(pk, None)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _release(self, row: Serving, state: str, error: str = ""):
        with transaction.atomic():
            updated = Serving.objects.filter(pk=row.pk, host=self.name).update(
                state=state, pid=None, restart_at=None, **({"error": error} if error else {}))
            if updated and row.port:
                unserve(row.version_id, self.url(row))
        self.deaths.pop(row.pk, None)

    def _fail(self, row: Serving, error: str):
        log.error("%s cannot be served: %s", row.version, error)
        self._release(row, Serving.State.FAILED, error or "its server could not be started")

    def stop(self, row: Serving):
        """Nobody uses it: the server ends and the version is a plain checkpoint again."""
        self._terminate(row.pk)
        self._release(row, Serving.State.STOPPED)
        log.info("stopped %s", row.version)

    def run(self, interval_s: float = 2.0):  # pragma: no cover - the command's loop; tests call tick()
        from django.db import DatabaseError, close_old_connections

        self.begin()
        while True:
            close_old_connections()
            try:
                self.tick()
            except DatabaseError as error:
                log.error("database unavailable (%s); trying again", error)
            time.sleep(interval_s)

