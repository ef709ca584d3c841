"""A fake Gemini REST API on 127.0.0.1 for tests and the benchmark: `generateContent` as the google-genai SDK calls
it, every request recorded, scripted faults, configurable latency.

    server = FakeGemini(latency=0.3).start()      # server.base_url -> settings.GOOGLE_GEMINI_BASE_URL
    server.script(["429", "503", "ok"])           # one fault per incoming call, then normal answers
    server.requests[0]["body"]                    # the JSON the SDK sent

Batch API: `models/M:batchGenerateContent` stores the inlined requests; `GET batches` lists them (one page);
`GET batches/N` says running `batch_polls` times (each GET's path is kept in `polls`), then answers every request
(scripted faults apply per request, in order: "429" and "503" are an error in place of that request's answer).
`paid_twice()` lists the calls sent again after an answer to the very same request had gone out whole.
Faults: "429" (RetryInfo hint of `retry_hint` seconds), "503", "timeout" (answers after `stall` seconds),
"non_json", "fenced" (the JSON inside a ```json fence), "no_verdict" (JSON without a verdict), "bare_list" (a
proposal's tasks as a bare JSON list, no {"tasks": ...}), "status_NNN" (an error with that HTTP status), "trickle"
(the answer a byte every `stall` / 20 s), "body_not_json" (a 200 whose body is a proxy's HTML page), "ok".
A proposal request (its prompt asks for {"tasks": [...]}) is answered with as many tasks as it asks for ("write N"),
each new (a counter), half of them naming a page of the request's focus; `answer` overrides this too.
Token counts imitate Gemini's: a text token per 4 characters, 258 tokens per image up to 384 px, otherwise 258 per
768x768 tile, or 64/256 per image under generationConfig.mediaResolution LOW/MEDIUM.
Run it alone with `python -m tests.fakes.gemini_server --latency 0.3` (prints its base URL).
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from PIL import Image

from tests.fakes.model_server import FakeModelServer, serve_alone

DEFAULT_ANSWER = {"parts": [{"part": "the whole task", "done": True, "evidence": "fake server: all done"}],
                  "verdict": "SUCCESS"}
_PATH = re.compile(r"^/v1(?:beta)?/models/(?P<model>[^:/]+):generateContent$")
_BATCH_CREATE = re.compile(r"^/v1(?:beta)?/models/(?P<model>[^:/]+):batchGenerateContent$")
_BATCH_GET = re.compile(r"^/v1(?:beta)?/(?P<name>batches/[^:/?]+)$")
_BATCH_LIST = re.compile(r"^/v1(?:beta)?/batches$")
_PROPOSAL = re.compile(r'\{"tasks": \[')
_ASKED = re.compile(r"\bwrite (\d+)\b")
_FOCUS_PAGE = re.compile(r"(/sites/[^\s,]+)")


def inline_bytes(data: str) -> bytes:
    """inlineData bytes; the SDK sends URL-safe base64, the REST docs show standard base64: accept both."""
    return base64.b64decode(data.replace("-", "+").replace("_", "/"))


def image_tokens(data: bytes) -> int:
    """Gemini's image cost: 258 tokens for a small image, else 258 per 768x768 tile."""
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


# generationConfig.mediaResolution: the tokens an image costs whatever its size (Gemini 2.x's table); HIGH and
# unspecified count tiles.
MEDIA_RESOLUTION_TOKENS = {"MEDIA_RESOLUTION_LOW": 64, "MEDIA_RESOLUTION_MEDIUM": 256}


def prompt_tokens(body: dict) -> tuple[int, int]:
    """(tokens of the text, tokens of the images) a request carries."""
    texts = [p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", [])]
    fixed = MEDIA_RESOLUTION_TOKENS.get((body.get("generationConfig") or {}).get("mediaResolution") or "")
    images = 0
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            texts.append(part.get("text", ""))
            inline = part.get("inlineData")
            if inline:
                tiled = image_tokens(inline_bytes(inline["data"]))  # decoded either way: a bad image is refused
                images += fixed or tiled
    return math.ceil(sum(len(t) for t in texts) / 4), images


class FakeGemini(FakeModelServer):
    def __init__(self, *, latency: float = 0.0, retry_hint: float = 0.2, stall: float = 5.0,
                 answer: Callable[[dict], dict] | None = None, count_images: bool = True,
                 keep_requests: bool = True) -> None:
        super().__init__(latency=latency, retry_hint=retry_hint, stall=stall, keep_requests=keep_requests)
        self.answer = answer or self.default_answer
        self._proposed = 0
        self.count_images = count_images
        self.batches: dict[str, dict] = {}  # name -> {"model", "requests", "polls_left", "state"}
        self.polls: list[str] = []  # the paths of the GETs that read a batch's state
        self.batch_polls = 1  # GETs that still say "running" before a batch succeeds
        self.batch_final_state = "BATCH_STATE_SUCCEEDED"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()  # the latency counts from here: this server's own work is inside it, as Gemini's
        raw = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        body = json.loads(raw or b"{}")
        match = _PATH.match(handler.path.split("?")[0])
        fault = self._next_fault(raw)
        record = {"path": handler.path, "model": match.group("model") if match else None, "fault": fault,
                  "headers": {k.lower(): v for k, v in handler.headers.items()}, "body": body, "at": time.time()}
        self.remember(record)
        batch = _BATCH_CREATE.match(handler.path.split("?")[0])
        if batch:
            time.sleep(max(0.0, self.latency - (time.monotonic() - arrived)))
            return self._send(handler, 200, self._batch_create(batch.group("model"), body))
        if not match:
            missing = {"error": {"code": 404, "message": "no such method", "status": "NOT_FOUND"}}
            return self._send(handler, 404, missing)
        if fault in ("429", "503", "timeout"):
            time.sleep(self.stall if fault == "timeout" else self.latency)
            if fault != "timeout":
                return self._send(handler, int(fault), self._error(int(fault)))
        if fault.startswith("status_"):
            return self._send(handler, int(fault[7:]), self._error(int(fault[7:])))
        if fault == "body_not_json":
            return self._send(handler, 200, b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")
        if fault == "trickle":
            return self._trickle(handler, self._response(body, fault), self.stall / 20)
        try:
            status, payload = 200, self._response(body, fault)
        except (ValueError, KeyError, OSError) as exc:  # an unreadable image, as Gemini would refuse it
            status = 400
            payload = {"error": {"code": 400, "message": f"bad request: {exc}", "status": "INVALID_ARGUMENT"}}
        if fault != "timeout":
            time.sleep(max(0.0, self.latency - (time.monotonic() - arrived)))
        if self._send(handler, status, payload) and status == 200:
            record["answered_at"] = time.time()  # the whole answer went out: the client had it to read

    def paid_twice(self) -> list[dict]:
        """The generateContent requests sent again after an answer to the very same request had gone out whole: a
        call paid twice for an answer the app had received (a call in flight when its worker died is not here)."""
        answered: dict[str, float] = {}
        twice = []
        for record in sorted(self.requests, key=lambda r: r["at"]):
            if record["model"] is None:
                continue
            key = hashlib.sha256(json.dumps(record["body"], sort_keys=True).encode()).hexdigest()
            if key in answered and answered[key] < record["at"]:
                twice.append({**record, "first_answered_at": answered[key]})
            if "answered_at" in record:
                answered.setdefault(key, record["answered_at"])
        return twice

    def _batch_create(self, model: str, body: dict) -> dict:
        """Store the inlined requests; answered (with the scripted faults) when the batch is read as done."""
        batch = body.get("batch") or {}
        requests = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
        with self._lock:
            name = f"batches/fake-{len(self.batches) + 1}"
            self.batches[name] = {"model": model, "requests": requests, "polls_left": self.batch_polls,
                                  "display_name": batch.get("displayName", "")}
        return self._batch_operation(name, "BATCH_STATE_PENDING")

    def _batch_operation(self, name: str, state: str, output: dict | None = None) -> dict:
        job = self.batches[name]
        metadata = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                    "model": f"models/{job['model']}", "displayName": job["display_name"], "state": state}
        if output is not None:
            metadata["output"] = output
        return {"name": name, "metadata": metadata, "done": output is not None}

    def _handle_get(self, handler: BaseHTTPRequestHandler) -> None:
        if _BATCH_LIST.match(handler.path.split("?")[0]):  # every job this server holds, in one page
            with self._lock:
                listed = [self._batch_operation(name, "BATCH_STATE_RUNNING") for name in self.batches]
            return self._send(handler, 200, {"operations": listed})
        with self._lock:
            self.polls.append(handler.path)
        match = _BATCH_GET.match(handler.path.split("?")[0])
        if not match or match.group("name") not in self.batches:
            return self._send(handler, 404, {"error": {"code": 404, "message": "no such batch", "status": "NOT_FOUND"}})
        name = match.group("name")
        with self._lock:
            job = self.batches[name]
            job["polls_left"] -= 1
            running = job["polls_left"] >= 0
        if running:
            return self._send(handler, 200, self._batch_operation(name, "BATCH_STATE_RUNNING"))
        if self.batch_final_state != "BATCH_STATE_SUCCEEDED":
            return self._send(handler, 200, self._batch_operation(name, self.batch_final_state))
        answers = [self._batch_answer(item) for item in job["requests"]]
        output = {"inlinedResponses": {"inlinedResponses": answers}}
        return self._send(handler, 200, self._batch_operation(name, "BATCH_STATE_SUCCEEDED", output))

    def _batch_answer(self, item: dict) -> dict:
        """One request's answer in a succeeded batch: a "429" or "503" fault is an error in its place."""
        fault, metadata = self._next_fault(), item.get("metadata") or {}
        if fault in ("429", "503"):
            error = self._error(int(fault))["error"]
            return {"error": {"code": error["code"], "message": error["message"]}, "metadata": metadata}
        return {"response": self._response(item.get("request") or {}, fault), "metadata": metadata}

    def default_answer(self, body: dict) -> dict:
        """A judge's verdict, or for a proposal request the tasks it asks for."""
        prompt = " ".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))
        if not _PROPOSAL.search(prompt):
            return DEFAULT_ANSWER
        asked = int((_ASKED.search(prompt) or [0, "20"])[1])
        focus = prompt.split("pages:", 1)[1].split(".\n", 1)[0] if "involve these pages:" in prompt else ""
        pages = _FOCUS_PAGE.findall(focus) or ["the home page"]
        with self._lock:
            first, self._proposed = self._proposed, self._proposed + asked
        return {"tasks": [_fake_task(first + k, pages[k % len(pages)]) for k in range(asked)]}

    def _error(self, code: int) -> dict:
        status = "RESOURCE_EXHAUSTED" if code == 429 else "UNAVAILABLE"
        details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{self.retry_hint}s"}]
        return {"error": {"code": code, "message": f"fake {status.lower()}", "status": status,
                          "details": details if code == 429 else []}}

    def _text(self, body: dict, fault: str) -> str:
        if fault == "non_json":  # in place of the next answer: a scripted agent's policy is not used up by it
            return "I think the agent did it, mostly."
        answer = self.answer(body)
        if fault == "fenced":
            return "Here is my judgment:\n```json\n" + json.dumps(answer) + "\n```"
        if fault == "no_verdict":
            return json.dumps({"parts": answer.get("parts", [])})
        if fault == "bare_list":
            return json.dumps(answer.get("tasks", []), ensure_ascii=False)
        return json.dumps(answer)

    def _response(self, body: dict, fault: str) -> dict:
        text = self._text(body, fault)
        text_tokens, image_tokens_ = prompt_tokens(body) if self.count_images else (0, 0)
        out = math.ceil(len(text) / 4)
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                                "index": 0}],
                "usageMetadata": {"promptTokenCount": text_tokens + image_tokens_, "candidatesTokenCount": out,
                                  "totalTokenCount": text_tokens + image_tokens_ + out},
                "modelVersion": "fake"}


def _fake_task(number: int, page: str) -> dict:
    if number % 5 < 2:  # two in five ask for information
        return {"instruction": f"Open {page} and report the title of entry number {number}", "kind": "info"}
    return {"instruction": f"Go to {page} and save entry number {number} for later", "kind": "action"}


if __name__ == "__main__":
    serve_alone(FakeGemini, __doc__.splitlines()[0])
