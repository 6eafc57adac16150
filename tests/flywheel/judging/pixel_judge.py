"""A stub OpenAI-compatible judge that answers from the pixels it is sent (or, `looks=False`, ignores them).

It refuses (HTTP 400) a chat request whose user message carries no image part, decodes every
image with Pillow, and finds the green "done" marker the test frames draw:
- a path vote ({"vote"}): true when the last frame shows the marker, else false;
- ratings ({"ratings"}): 1 for a step whose frame ("the screen after step N") shows it, else -1;
- a rewrite ({"text"}): names the colour of the terminal frame's marker, or says it sees none.
"""
import base64
import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image, ImageDraw

GREEN = (0, 200, 0)
SIZE = (1080, 2400)


def frame(done: bool, size=SIZE) -> bytes:
    """A phone frame with some dark 'text' bars, and the green done marker when `done`."""
    image = Image.new("RGB", size, (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for row in range(5):
        draw.rectangle([60, 200 + row * 160, 900, 240 + row * 160], fill=(30, 30, 30))
    if done:
        draw.ellipse([400, 1400, 680, 1680], fill=GREEN)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def shows_marker(png: bytes) -> bool:
    with Image.open(io.BytesIO(png)) as image:
        colours = image.convert("RGB").getcolors(1 << 24)
    green = sum(count for count, (r, g, b) in colours if g > 150 and r < 80 and b < 80)
    return green > 100


def images_of(request: dict) -> list[bytes]:
    user = request["messages"][-1]["content"]
    parts = user if isinstance(user, list) else []
    return [base64.b64decode(part["image_url"]["url"].split("base64,", 1)[1])
            for part in parts if part.get("type") == "image_url"]


def text_of(request: dict) -> str:
    user = request["messages"][-1]["content"]
    if isinstance(user, str):
        return user
    return "\n".join(part["text"] for part in user if part.get("type") == "text")


def is_uniform(png: bytes) -> bool:
    with Image.open(io.BytesIO(png)) as image:
        return len(image.convert("RGB").getcolors(2) or []) == 1


class PixelJudge:
    def __init__(self, looks: bool = True, model: str = "vlm-judge"):
        self.looks, self.model, self.requests = looks, model, []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                stub.requests.append(request)
                images = images_of(request)
                if not images:
                    return self._send(400, {"error": "no image part in the user message"})
                self._send(200, {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": json.dumps(stub.answer(request, images))}}]})

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, request: dict, images: list[bytes]) -> dict:
        seen = [shows_marker(png) if self.looks else True for png in images]
        system = request["messages"][0]["content"]
        if '"ratings"' in system:
            text = text_of(request)
            after = [int(n) for n in re.findall(r"the screen after step (\d+)", text)]
            rated = [int(n) for n in re.search(r"Rate steps ([\d, ]+)", text).group(1).split(",")]
            by_step = dict(zip(after, seen))
            return {"ratings": [{"step": step, "rating": 1 if by_step.get(step) else -1} for step in rated]}
        if '"text"' in system:
            return {"text": "Show the green done mark" if seen[-1] else "Show a screen without any mark"}
        return {"vote": "true" if seen[-1] else "false", "rationale": "the last screenshot shows the done mark"
                if seen[-1] else "no done mark on the last screenshot"}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
