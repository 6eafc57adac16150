"""Model hosts (issue #32): a trained checkpoint is served, registered, restarted and stopped unattended."""
import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from flywheel.models import CollectionRun, ModelVersion
from training.model_host.host import ModelHost, claim, needs_serving, request_serving, wanted_ids
from training.models import Serving

pytestmark = pytest.mark.django_db


def free_port():
    from tests.conftest import free_port as port

    return port()


def free_first_port():
    from tests.conftest import free_first_port as first

    return first()


def checkpoint_version(name, artifact, **fields):
    return ModelVersion.objects.create(name=name, kind="checkpoint", artifact=str(artifact), **fields)


@pytest.fixture
def tiny_checkpoint(torch, tmp_path):
    from training.trainer.tiny import build_tiny, save_artifact

    model, processor = build_tiny({})
    return save_artifact(model, processor, tmp_path / "tiny-final")


def png_data_url():
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (120, 200), (30, 140, 220)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def http(method, url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def tick_until(host, predicate, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host.tick()
        row = Serving.objects.filter(host=host.name).select_related("version").order_by("-pk").first()
        if row is not None and predicate(row):
            return row
        time.sleep(0.5)
    raise AssertionError(f"timed out; last state: {row and (row.state, row.error, row.restarts)}")


# --- who needs serving: data, and claims that never overlap -------------------------------------------

def test_needs_serving_is_the_wanted_unheld_checkpoints(tmp_path):
    old = checkpoint_version("m+sft#1", tmp_path / "1")
    new = checkpoint_version("m+sft#2", tmp_path / "2")
    ModelVersion.objects.create(name="by-hand", kind="endpoint", artifact=str(tmp_path / "3"),
                                endpoint_url="http://127.0.0.1:9/v1")
    ModelVersion.objects.create(name="no-artifact", kind="checkpoint")
    assert list(needs_serving(keep_warm=1)) == [new]            # the newest one is kept warm
    assert set(needs_serving(keep_warm=0)) == set()             # nobody uses either
    CollectionRun.objects.create(line="rl", model_version=old, status="running")
    assert old.pk in wanted_ids(0) and list(needs_serving(keep_warm=0)) == [old]

    first, second = claim("host-a", 5, keep_warm=1), claim("host-b", 5, keep_warm=1)
    assert {row.version for row in first} == {old, new} and second == []
    assert Serving.objects.get(version=new).host == "host-a"
    # a silent host's versions are free again (unless its endpoint still answers); a failed one never is
    Serving.objects.filter(version=new).update(state="serving", heartbeat_at=timezone.now() - timedelta(hours=1))
    ModelVersion.objects.filter(pk=new.pk).update(kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                                  health={"ok": True})
    Serving.objects.filter(version=old).update(state="failed", error="no weights")
    assert claim("host-b", 5, keep_warm=1) == []
    ModelVersion.objects.filter(pk=new.pk).update(health={})
    assert [row.version for row in claim("host-b", 5, keep_warm=1)] == [new]
    assert Serving.objects.get(version=new).host == "host-b"
    assert claim("host-c", 5, keep_warm=1) == []


def test_serve_it_now_holds_an_older_checkpoint_served_for_a_while(tmp_path, client_as):
    old = checkpoint_version("m+sft#1", tmp_path / "1")
    checkpoint_version("m+sft#2", tmp_path / "2")
    assert old.pk not in wanted_ids(keep_warm=1)
    page = client_as("manager").get(f"/training/models/{old.pk}/").content.decode()
    assert 'data-testid="serve-now"' in page
    client_as("manager").post(f"/training/models/{old.pk}/serve/")
    row = Serving.objects.get(version=old)
    assert row.state == "stopped" and row.wanted_until > timezone.now() + timedelta(minutes=50)
    assert old.pk in wanted_ids(keep_warm=0) and old in [r.version for r in claim("host-a", 5, keep_warm=0)]
    Serving.objects.filter(pk=row.pk).update(wanted_until=timezone.now() - timedelta(seconds=1))
    assert old.pk not in wanted_ids(keep_warm=0)                # the hold is over and no run uses it
    no_folder = ModelVersion.objects.create(name="plain", kind="checkpoint")
    client_as("manager").post(f"/training/models/{no_folder.pk}/serve/")
    assert not Serving.objects.filter(version=no_folder).exists()


def test_a_full_host_makes_room_for_a_version_a_run_needs_never_for_one_merely_warm(tmp_path):
    asked = checkpoint_version("m+sft#1", tmp_path / "1")
    host = ModelHost("host-a", address="127.0.0.1", first_port=free_first_port(), max_servers=1, keep_warm=2,
                     engine="builtin", device="cpu", log_dir=tmp_path / "model-host")
    Serving.objects.create(version=asked, state="serving", host="host-a", port=9, heartbeat_at=timezone.now(),
                           wanted_until=timezone.now() + timedelta(minutes=30))
    ModelVersion.objects.filter(pk=asked.pk).update(kind="endpoint", endpoint_url="http://127.0.0.1:9/v1",
                                                    health={"ok": True})
    warm = checkpoint_version("m+sft#2", tmp_path / "2")          # only the newest: kept warm if there is room
    assert list(needs_serving(keep_warm=2)) == [warm] and host.make_room() is False
    assert Serving.objects.get(version=asked).state == "serving"
    CollectionRun.objects.create(line="rl", model_version=warm, status="running")   # now a run needs it
    assert host.make_room() is True
    assert Serving.objects.get(version=asked).state == "stopped"
    asked.refresh_from_db()
    assert asked.kind == "checkpoint" and not asked.endpoint_url
    assert [row.version for row in claim("host-a", 1, keep_warm=2)] == [warm]
    # what someone asked for is claimed before what is merely kept warm
    CollectionRun.objects.filter(model_version=warm).update(status="done")
    Serving.objects.filter(version=warm).update(state="stopped")
    checkpoint_version("m+sft#4", tmp_path / "4")
    request_serving(asked)
    assert [row.version for row in claim("host-a", 1, keep_warm=2)] == [asked]
    Serving.objects.filter(version=asked).update(state="stopped")
    CollectionRun.objects.filter(model_version=warm).update(status="running")
    # a version a run uses is never the one stopped to make room
    Serving.objects.filter(version=warm).update(state="serving", heartbeat_at=timezone.now())
    CollectionRun.objects.create(line="rl", model_version=checkpoint_version("m+sft#3", tmp_path / "3"),
                                 status="running")
    assert host.make_room() is False and Serving.objects.get(version=warm).state == "serving"


# --- the built-in server ----------------------------------------------------------------------------

def test_the_builtin_server_answers_chat_completions_with_an_image(tiny_checkpoint):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "training.model_host.server", "--model", str(tiny_checkpoint),
                                "--served-model-name", "tiny-sft-1", "--port", str(port), "--device", "cpu",
                                "--max-new-tokens", "6"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, process.stderr.read().decode()[-2000:]
            try:
                if http("GET", base + "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server never answered"
            time.sleep(0.5)
        status, models = http("GET", base + "/v1/models")
        assert status == 200 and [entry["id"] for entry in models["data"]] == ["tiny-sft-1"]
        messages = [{"role": "system", "content": "You operate a phone."},
                    {"role": "user", "content": [{"type": "text", "text": "Open Settings"},
                                                 {"type": "image_url", "image_url": {"url": png_data_url()}}]}]
        status, reply = http("POST", base + "/v1/chat/completions",
                             {"model": "tiny-sft-1", "messages": messages, "temperature": 0, "max_tokens": 4,
                              "logprobs": True, "top_logprobs": 2})
        assert status == 200, reply
        choice = reply["choices"][0]
        assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
        assert choice["finish_reason"] in ("stop", "length")
        # the screenshot reached the model: its visual tokens are in the prompt (120×200 → 4×7 merged patches)
        status, text_only = http("POST", base + "/v1/chat/completions",
                                 {"messages": [messages[0], {"role": "user", "content": "Open Settings"}],
                                  "max_tokens": 1})
        assert reply["usage"]["prompt_tokens"] >= text_only["usage"]["prompt_tokens"] + 20
        tokens = choice["logprobs"]["content"]
        assert len(tokens) == reply["usage"]["completion_tokens"] >= 1
        for token in tokens:
            assert token["logprob"] <= 0 and len(token["top_logprobs"]) == 2
            # greedy: the chosen token is the most likely one
            assert token["logprob"] == pytest.approx(token["top_logprobs"][0]["logprob"], abs=1e-5)
        # sampling for RL: temperature > 0 still gives each token's log-probability
        status, sampled = http("POST", base + "/v1/chat/completions",
                               {"messages": messages, "temperature": 1.0, "seed": 3, "max_tokens": 3, "logprobs": True})
        assert status == 200 and all(t["logprob"] <= 0 for t in sampled["choices"][0]["logprobs"]["content"])
        # a remote image is refused, not fetched; another model's name is not served
        remote = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}]
        assert http("POST", base + "/v1/chat/completions", {"messages": remote})[0] == 400
        assert http("POST", base + "/v1/chat/completions", {"model": "other", "messages": messages})[0] == 404
    finally:
        process.terminate()
        process.wait(timeout=15)


# --- the host ---------------------------------------------------------------------------------------

def make_host(tmp_path, name="host-a", keep_warm=1):
    return ModelHost(name, address="127.0.0.1", first_port=free_first_port(), max_servers=2, keep_warm=keep_warm,
                     engine="builtin", device="cpu", log_dir=tmp_path / "model-host", start_timeout_s=240)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_host_serves_a_checkpoint_restarts_its_server_and_stops_it_when_unused(tiny_checkpoint, tmp_path):
    version = checkpoint_version("tiny+sft#1", tiny_checkpoint)
    host = make_host(tmp_path)
    try:
        row = tick_until(host, lambda row: row.state == "serving")
        version.refresh_from_db()
        assert version.kind == "endpoint" and version.health["ok"] is True
        assert version.endpoint_url == f"http://127.0.0.1:{row.port}/v1" and version.served_model_name == "tiny-sft-1"
        assert row.engine == "builtin" and row.restarts == 0 and alive(row.pid)
        assert claim("host-b", 5, keep_warm=1) == []          # held: no second host serves it

        # its server is killed: the host starts it again (after 1 s) and it serves again
        first_pid, first_served = row.pid, row.first_served_at
        assert first_served == row.serving_since
        os.kill(first_pid, signal.SIGKILL)
        row = tick_until(host, lambda row: row.restarts == 1 and row.state == "serving")
        assert row.pid != first_pid and alive(row.pid)
        assert row.first_served_at == first_served < row.serving_since   # checkpoint → first served, kept
        version.refresh_from_db()
        assert version.kind == "endpoint" and version.health["ok"] is True

        # nobody uses it any more (no run, and no checkpoint is kept warm): stopped, a plain checkpoint again
        last_pid = row.pid
        host.keep_warm = 0
        host.tick()
        row = Serving.objects.get(version=version)
        assert row.state == "stopped" and row.pid is None and not host.processes
        version.refresh_from_db()
        assert version.kind == "checkpoint" and version.endpoint_url == "" and not version.health
        assert not alive(last_pid)
    finally:
        host.shutdown()


def test_a_checkpoint_missing_files_is_failed_with_the_loaders_reason_on_its_page(tiny_checkpoint, tmp_path,
                                                                                  client_as):
    (tiny_checkpoint / "model.safetensors").unlink()
    version = checkpoint_version("tiny+sft#7", tiny_checkpoint)
    host = make_host(tmp_path)
    try:
        row = tick_until(host, lambda row: row.state in ("failed", "serving"))
        assert row.state == "failed" and row.error and "Traceback" not in row.error
        assert "safetensors" in row.error or "no file named" in row.error.lower()
        version.refresh_from_db()
        assert version.kind == "checkpoint"
        for _ in range(3):                                       # never retried by itself
            host.tick()
        assert Serving.objects.get(version=version).state == "failed" and not host.processes

        client = client_as("manager")
        page = client.get(f"/training/models/{version.pk}/").content.decode()
        assert "Failed (the checkpoint cannot be served)" in page and 'data-testid="serving-error"' in page
        from django.utils.html import escape
        assert escape(row.error) in page and 'data-testid="serve-again"' in page
        client.post(f"/training/models/{version.pk}/serve/")
        assert Serving.objects.get(version=version).state == "stopped" and not Serving.objects.get(version=version).error
        assert [r.version for r in claim("host-b", 1, keep_warm=1)] == [version]
    finally:
        host.shutdown()


def test_a_gpu_less_host_asked_for_vllm_fails_the_version_with_the_reason_and_the_round_pauses(tmp_path, client_as,
                                                                                               monkeypatch):
    from training import round_trainer
    from training.model_host import host as host_module

    monkeypatch.setattr(host_module.shutil, "which", lambda name: None)  # whatever this machine has: no GPU
    version = checkpoint_version("m+sft#3", tmp_path)
    host = ModelHost("gpu-less", address="127.0.0.1", first_port=free_first_port(), max_servers=1, keep_warm=1,
                     engine="vllm", device="cpu", log_dir=tmp_path / "model-host")
    host.tick()
    row = Serving.objects.get(version=version)
    assert row.state == "failed" and not host.processes and row.pid is None
    assert "MODEL_HOST_ENGINE=vllm" in row.error and ("not installed" in row.error or "no NVIDIA GPU" in row.error)
    page = client_as("manager").get(f"/training/models/{version.pk}/").content.decode()
    assert "MODEL_HOST_ENGINE=vllm" in page and 'data-testid="serve-again"' in page
    # A loop round waiting for this checkpoint pauses with the same words.
    waiting = round_trainer.serving_state(version)
    assert waiting["status"] == "paused" and "MODEL_HOST_ENGINE=vllm" in waiting["detail"]


def test_a_model_host_killed_mid_serve_hands_its_version_to_another_host(tiny_checkpoint, tmp_path, settings):
    from training.round_trainer import serving_state
    from training.tasks import check_model_endpoints

    version = checkpoint_version("tiny+rl#4", tiny_checkpoint)
    first = make_host(tmp_path, name="host-a")
    row = tick_until(first, lambda row: row.state == "serving")
    killed_url = f"http://127.0.0.1:{row.port}/v1"
    # host-a dies with its server (SIGKILL: no shutdown runs, its rows stay "serving" under its name)
    os.kill(row.pid, signal.SIGKILL)
    first.processes.clear()
    assert wait_until(lambda: not alive(row.pid) or zombie(row.pid))
    check_model_endpoints()                       # beat: the endpoint no longer answers
    version.refresh_from_db()
    assert version.health["ok"] is False and serving_state(version)["status"] == "running"
    assert "not healthy" in serving_state(version)["detail"]
    second = make_host(tmp_path, name="host-b")
    try:
        second.tick()
        assert Serving.objects.get(version=version).host == "host-a"  # its heartbeat is still recent
        Serving.objects.filter(version=version).update(heartbeat_at=timezone.now() - timedelta(
            seconds=settings.MODEL_HOST_STALE_S + 1))
        row = tick_until(second, lambda row: row.state == "serving")
        version.refresh_from_db()
        assert row.host == "host-b" and version.kind == "endpoint" and version.health["ok"] is True
        assert version.endpoint_url != killed_url and serving_state(version) is None
    finally:
        second.shutdown()


def wait_until(predicate, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def zombie(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False
