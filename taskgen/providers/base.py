"""The one call shape every provider answers, and the per-process cache of their SDK clients."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ProviderImage:
    """An image as sent: its bytes, MIME type, and where it came from (a screenshot name) for dry runs and logs."""

    data: bytes
    mime_type: str
    label: str = ""


@dataclass
class ProviderRequest:
    """One model call. `evidence` is for offline baselines that read the evidence itself instead of the prompt."""

    model: str
    system: str
    prompt: str
    images: list[ProviderImage] = field(default_factory=list)
    json_mode: bool = True
    evidence: Any = None
    media_resolution: str | None = None  # Gemini's MEDIA_RESOLUTION_LOW/MEDIUM: tokens per image set by the model
    temperature: float = 0.0  # 0 for a judge (the same answer again); a proposer asks for variety


@dataclass
class ProviderResult:
    """A model's answer text, its reasoning when the server returns it apart, and what it cost."""

    text: str
    reasoning: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: int = 0


class ProviderError(Exception):
    """A call that failed. `transient` errors (rate limit, server error, timeout) may succeed if tried again;
    `retry_after` is the server's hint in seconds, when it gave one."""

    def __init__(self, message: str, *, transient: bool, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status
        self.retry_after = retry_after


class Provider(Protocol):
    name: str

    def complete(self, request: ProviderRequest) -> ProviderResult: ...


class ClientsPerProcess:
    """SDK clients made once per process and key (making one per call costs CPU for nothing), forgotten in a forked
    child: a parent's clients hold its pooled connections, whose sockets the child would share, and two processes
    talking on one socket mix their calls (a Celery prefork worker, a benchmark's worker processes)."""

    def __init__(self) -> None:
        self._clients: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        client = self._clients.get(key)  # the common case takes no lock
        if client is not None:
            return client
        with self._lock:
            if key not in self._clients:
                self._clients[key] = make()
            return self._clients[key]

    def _forget(self) -> None:
        self._clients = {}
        self._lock = threading.Lock()  # a lock held by a parent's thread at the fork would never be released here
