"""An answer's body read within the model timeout, for every provider's HTTP client.

The clients' timeouts (httpx's) are per read: a server that trickles its answer a few bytes at a time, as a slow
model streaming tokens behind a buffering proxy does, was waited on for as long as it took (85 s with a 2 s timeout).
The transport here cuts a body that is still arriving `seconds` after its headers came with a ReadTimeout, which the
providers report as a timeout (transient, retried by the one rule in retry.py).
"""
from __future__ import annotations

import functools
import os
import ssl
import time
from collections.abc import Iterator

import httpx2 as httpx  # the SDKs (openai, google-genai) send through httpx2

from taskgen.providers.exchanges import exchange_begins, exchange_ends


class _BodyWithin(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream, seconds: float, hold=None) -> None:
        self.stream, self.seconds, self.hold = stream, seconds, hold

    def __iter__(self) -> Iterator[bytes]:
        deadline = time.monotonic() + self.seconds
        for chunk in self.stream:
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"the answer was still arriving {self.seconds:g}s after it started")
            yield chunk

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            exchange_ends(self.hold)  # the answer is read: its place among the calls in flight is free


class BodyDeadlineTransport(httpx.BaseTransport):
    """httpx's own transport, each response's body cut `seconds` after its headers arrived; an exchange holds one of
    its caller's places among the calls in flight while it is on the wire (exchanges.py)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.inner = httpx.HTTPTransport(verify=tls_context())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        hold = exchange_begins()
        try:
            response = self.inner.handle_request(request)
        except BaseException:
            exchange_ends(hold)
            raise
        return httpx.Response(response.status_code, headers=response.headers, request=request,
                              stream=_BodyWithin(response.stream, self.seconds, hold), extensions=response.extensions)

    def close(self) -> None:
        self.inner.close()


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of this process's model clients, made as the SDKs make theirs (SSL_CERT_FILE and
    SSL_CERT_DIR when set, else httpx's default): each SDK client otherwise loads the certificate store again for
    its sync transport, its async client and its websocket (~20 ms of CPU each, before the first call can leave)."""
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"), capath=os.environ.get("SSL_CERT_DIR"))
    return httpx.create_ssl_context()


def timeout_words(error: Exception) -> str:
    """A timeout's own words, for the provider's message (': the answer was still arriving...'), '' when it has none."""
    return f": {error}" if str(error) else ""
