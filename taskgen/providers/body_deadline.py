"""An answer's body read within the model timeout, for every provider's HTTP client.

The clients' timeouts (httpx's) are per read: a server that trickles its answer a few bytes at a time, as a slow
model streaming tokens behind a buffering proxy does, was waited on for as long as it took (85 s with a 2 s timeout).
The transport here cuts a body that is still arriving `seconds` after its headers came with a ReadTimeout, which the
providers report as a timeout (transient, retried by the one rule in retry.py).
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2 as httpx  # the SDKs (openai, google-genai) send through httpx2


class _BodyWithin(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, seconds: float) -> None:
        self.stream, self.seconds = stream, seconds

    def __iter__(self) -> Iterator[bytes]:
        deadline = time.monotonic() + self.seconds
        for chunk in self.stream:
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"the answer was still arriving {self.seconds:g}s after it started")
            yield chunk

    def close(self) -> None:
        self.stream.close()


class BodyDeadlineTransport(httpx.BaseTransport):
    """httpx's own transport, each response's body cut `seconds` after its headers arrived."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        return httpx.Response(response.status_code, headers=response.headers, request=request,
                              stream=_BodyWithin(response.stream, self.seconds), extensions=response.extensions)

    def close(self) -> None:
        self.inner.close()


def timeout_words(error: Exception) -> str:
    """A timeout's own words, for the provider's message (': the answer was still arriving...'), '' when it has none."""
    return f": {error}" if str(error) else ""
