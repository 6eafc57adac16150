"""A tiny OpenAI-compatible server (http.server on a thread) that answers like vLLM would."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubOpenAI:
    """`replies` is a list of (status, body-or-text, delay_s) consumed per chat request."""

    def __init__(self, model="gui-agent-7b"):
        self.model = model
        self.replies = []
        self.requests = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": stub.model, "object": "model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                stub.requests.append(json.loads(self.rfile.read(length)))
                status, body, delay = stub.replies.pop(0) if stub.replies else (500, {"error": "no reply"}, 0)
                if delay:
                    time.sleep(delay)
                self._send(status, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def chat_reply(self, content, logprobs=None):
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if logprobs is not None:
            choice["logprobs"] = {"content": [{"token": "x", "logprob": lp} for lp in logprobs]}
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": self.model, "choices": [choice],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
