"""Model endpoints are called only where they may be, never follow redirects, and reply within a cap."""
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from flywheel.endpoints.chat import JudgeUnavailable, ask_json
from flywheel.models import ModelVersion
from flywheel.policies import EndpointPolicy, PolicyError, check_endpoint_health
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.policies.test_endpoint import GOOD, state

REFUSED_URLS = [
    "http://169.254.169.254/latest/meta-data",     # cloud metadata
    "http://[::ffff:169.254.169.254]/v1",           # the same, wrapped in IPv6
    "http://[fe80::1]:8000/v1",                     # IPv6 link-local
    "http://0.0.0.0:8000/v1",                       # reaches whatever listens on this host
    "http://224.0.0.1/v1",                          # multicast
    "http://[fd00:ec2::254]/v1",                    # AWS's IPv6 metadata address
    "file:///etc/passwd", "ftp://10.0.0.1/v1", "gopher://127.0.0.1:6379/_INFO",
    "http://user:secret@127.0.0.1:8000/v1",
]


@pytest.fixture
def no_connections(monkeypatch):
    """Any attempt to open a TCP connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def resolve_as(monkeypatch):
    """Make a host name resolve to given addresses (DNS is the input under test here)."""
    real = socket.getaddrinfo
    names = {}

    def fake(host, port, *args, **kwargs):
        if host in names:
            family = socket.AF_INET6 if ":" in names[host] else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (names[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return names


class HostileServer:
    """Answers every request with a redirect, a huge body, or an error that quotes a secret."""

    def __init__(self, mode):
        self.paths = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                server.paths.append((self.command, self.path))
                if self.headers.get("Content-Length"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                if mode == "redirect":
                    self.send_response(307 if self.command == "POST" else 302)
                    self.send_header("Location", f"http://127.0.0.1:{server.port}/stolen")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif mode in ("huge", "huge-declared"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    if mode == "huge-declared":
                        self.send_header("Content-Length", str(5_000_000))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    try:
                        self.wfile.write(b'{"choices": [{"message": {"content": "')
                        for _ in range(500):
                            self.wfile.write(b"x" * 10_000)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                else:  # an error whose body must not reach our messages
                    data = json.dumps({"error": "denied", "token": "SECRET-TOKEN-123"}).encode()
                    self.send_response(400)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_metadata_link_local_and_other_schemes_are_refused_without_a_connection(url, no_connections):
    with pytest.raises(PolicyError, match="refused") as raised:
        EndpointPolicy(url, "m", retries=2).propose(state())
    assert len(raised.value.model_io["attempts"]) == 1, "a refusal is not retried"
    health = check_endpoint_health(url)
    assert not health["ok"] and ("refused" in health["error"] or "http(s)" in health["error"]
                                 or "password" in health["error"])


@pytest.mark.django_db
def test_the_judge_is_held_to_the_same_rule(no_connections):
    version = ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url="http://169.254.169.254/v1")
    with pytest.raises(JudgeUnavailable, match="link-local"):
        ask_json(version, "system", "user")


def test_a_name_is_resolved_again_at_call_time(resolve_as, no_connections):
    """Registered while harmless, the name now points at the metadata service: the call is refused."""
    resolve_as["models.internal"] = "169.254.169.254"
    with pytest.raises(PolicyError, match="models.internal resolves to 169.254.169.254"):
        EndpointPolicy("http://models.internal:8000/v1", "m").propose(state())


def test_redirects_are_never_followed():
    with HostileServer("redirect") as server:
        with pytest.raises(PolicyError, match="redirect") as raised:
            EndpointPolicy(server.url, "m", retries=2).propose(state())
        health = check_endpoint_health(server.url)
    assert [path for _, path in server.paths] == ["/v1/chat/completions", "/v1/models"]
    assert raised.value.model_io["attempts"][0]["error"].startswith("the endpoint answered HTTP 307")
    assert not health["ok"] and "redirect" in health["error"]


@pytest.mark.parametrize("mode", ["huge", "huge-declared"])
def test_huge_replies_are_cut_off_and_not_stored(mode, settings):
    settings.MODEL_ENDPOINT_MAX_REPLY_BYTES = 100_000
    with HostileServer(mode) as server:
        with pytest.raises(PolicyError, match="over the 100000-byte limit") as raised:
            EndpointPolicy(server.url, "m", retries=2).propose(state())
    assert len(raised.value.model_io["attempts"]) == 1
    assert "response" not in raised.value.model_io
    assert len(json.dumps(raised.value.model_io)) < 20_000


def test_errors_name_the_failure_without_quoting_the_reply():
    with HostileServer("error") as server:
        with pytest.raises(PolicyError) as raised:
            EndpointPolicy(server.url, "m").propose(state())
    assert "HTTP 400" in str(raised.value) and "SECRET-TOKEN-123" not in str(raised.value)


def test_admins_can_narrow_the_allowed_networks(settings):
    with StubOpenAI() as stub:
        stub.replies.append((200, stub.chat_reply(GOOD), 0))
        settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["10.0.0.0/8"]
        with pytest.raises(PolicyError, match="outside MODEL_ENDPOINT_ALLOWED_NETWORKS"):
            EndpointPolicy(stub.url, stub.model).propose(state())
        settings.MODEL_ENDPOINT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
        assert EndpointPolicy(stub.url, stub.model).propose(state()).action["action"] == "click"


@pytest.mark.django_db
def test_registration_refuses_unsafe_urls_on_the_page_and_in_the_api(client_as, resolve_as):
    client = client_as("admin")
    page = client.post("/endpoints/add/", {"name": "meta", "endpoint_url": "http://169.254.169.254/v1"},
                       follow=True).content.decode()
    assert "Endpoint URL: refused: 169.254.169.254 is a link-local" in page
    response = client.post("/api/model-versions/", {"name": "meta", "kind": "endpoint",
                                                     "endpoint_url": "http://[::ffff:169.254.169.254]/v1"},
                           content_type="application/json")
    assert response.status_code == 400 and "link-local" in response.json()["endpoint_url"][0]
    assert not ModelVersion.objects.filter(name="meta").exists()
    # a vLLM server on a private network, named by a single-label host, is welcome
    resolve_as["gpu-host"] = "10.1.2.3"
    response = client.post("/api/model-versions/", {"name": "agent", "kind": "endpoint",
                                                     "endpoint_url": "http://gpu-host:8000/v1"},
                           content_type="application/json")
    assert response.status_code == 201, response.content
