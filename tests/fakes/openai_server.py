"""A fake OpenAI-compatible chat-completions server on 127.0.0.1 (as vLLM, Ollama or llama.cpp serve one), for
tests and the benchmark: every request recorded, scripted faults, configurable latency.

    server = FakeOpenAI(answer=lambda body: {"verdict": "SUCCESS", "parts": []}).start()
    server.base_url                               # -> settings.OPENAI_BASE_URL (".../v1")
    server.script(["429", "503", "ok"])           # one fault per incoming call, then normal answers
    server.fault_when = lambda body: "503" if "Lyon" in str(body) else None   # faults chosen by the request

`answer(body)` returns the message: a dict (sent as JSON text), a str (sent as is), or a (text, reasoning) pair
whose reasoning comes back as `reasoning_content`, as vLLM's reasoning parser returns it.
Faults: "429" and "503" (Retry-After of `retry_hint` s), "429_bare" and "503_bare" (no Retry-After), "500",
"timeout" (answers after `stall` s), "trickle" (the answer a byte every `stall` / 20 s, as a slow token stream),
"non_json" (prose as the message, in place of the next answer), "body_not_json" (a 200 whose body is a proxy's
HTML page), "context_400" (vLLM's 400 for a prompt longer than the model's context), "empty" (no choices),
"status_NNN" (an error with that HTTP status), "json_mode_400" (LM Studio's refusal of JSON mode), "ok".
`refuses_json_mode` answers a request asking for response_format json_object with LM Studio's 400.
Tokens: a token per 4 characters of text, 500 per image.
Run it alone with `python -m tests.fakes.openai_server --latency 1` (prints its base URL).
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from tests.fakes.model_server import FakeModelServer, serve_alone

IMAGE_TOKENS = 500
CONTEXT_ERROR = {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                 "message": "This model's maximum context length is 8192 tokens. However, you requested 12000 tokens "
                            "(11000 in the messages, 1000 in the completion). Please reduce the length of the messages "
                            "or completion."}
JSON_MODE_ERROR = {"error": "'response_format.type' must be 'json_schema' or 'text'"}
NOT_JSON_BODY = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>nginx</body></html>"


def _prompt_tokens(body: dict) -> int:
    chars = images = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
            continue
        for part in content or []:
            chars += len(part.get("text") or "")
            images += part.get("type") == "image_url"
    return math.ceil(chars / 4) + images * IMAGE_TOKENS


def request_images(body: dict) -> list[str]:
    """The data URLs a request carries (its images), in order."""
    urls = []
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            urls += [p["image_url"]["url"] for p in message["content"] if p.get("type") == "image_url"]
    return urls


class FakeOpenAI(FakeModelServer):
    def __init__(self, *, latency: float = 0.0, retry_hint: float = 0.2, stall: float = 5.0,
                 answer: Callable[[dict], dict | str | tuple[str, str]] | None = None,
                 keep_requests: bool = True) -> None:
        super().__init__(latency=latency, retry_hint=retry_hint, stall=stall, keep_requests=keep_requests)
        self.answer = answer or (lambda body: {"verdict": "SUCCESS", "parts": []})
        self.fault_when: Callable[[dict], str | None] = lambda body: None  # a fault chosen by the request itself
        self.refuses_json_mode = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("content-length") or 0))
        body = json.loads(raw or b"{}")
        fault = self._next_fault()
        fault = self.fault_when(body) or fault if fault == "ok" else fault
        self.remember({"path": handler.path, "fault": fault, "body": body, "at": time.time(),
                       "headers": {k.lower(): v for k, v in handler.headers.items()}})
        if handler.path.rstrip("/") != "/v1/chat/completions":
            return self._send(handler, 404, {"error": {"message": "no such route", "type": "not_found"}})
        time.sleep(self.stall if fault == "timeout" else self.latency)
        if fault in ("429", "500", "503", "429_bare", "503_bare"):
            error = {"error": {"message": f"fake {fault}", "type": "server_error", "code": fault[:3]}}
            hint = {} if fault.endswith("_bare") else {"Retry-After": str(self.retry_hint)}
            return self._send(handler, int(fault[:3]), error, hint)
        if fault == "json_mode_400" or (self.refuses_json_mode and "response_format" in body):
            return self._send(handler, 400, JSON_MODE_ERROR)
        if fault.startswith("status_"):
            error = {"error": {"message": f"fake {fault[7:]}", "type": "error", "code": fault[7:]}}
            return self._send(handler, int(fault[7:]), error)
        if fault == "context_400":
            return self._send(handler, 400, CONTEXT_ERROR)
        if fault == "body_not_json":
            return self._send(handler, 200, NOT_JSON_BODY, content_type="text/html")
        if fault == "trickle":
            return self._trickle(handler, self._completion(body, fault), self.stall / 20)
        return self._send(handler, 200, self._completion(body, fault))

    def _completion(self, body: dict, fault: str) -> dict:
        # A garbage answer stands in for the scripted one (a policy's next answer is not used up by it).
        answer = "Let me think. I would probably click something." if fault == "non_json" else self.answer(body)
        text, reasoning = answer if isinstance(answer, tuple) else (answer, "")
        text = text if isinstance(text, str) else json.dumps(text)
        message = {"role": "assistant", "content": text}
        if reasoning:
            message["reasoning_content"] = reasoning
        prompt = _prompt_tokens(body)
        out = math.ceil(len(text + reasoning) / 4)
        choices = [] if fault == "empty" else [{"index": 0, "message": message, "finish_reason": "stop"}]
        return {"id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", ""), "choices": choices,
                "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}}


if __name__ == "__main__":
    serve_alone(FakeOpenAI, __doc__.splitlines()[0])
