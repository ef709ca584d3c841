"""The sandbox sites' server for a harness process: Django's threaded WSGI server on 127.0.0.1, ephemeral port.

One per process, started on first use, so a Celery worker child serves its own browser without any setup; a
configured base URL (TASKGEN_SANDBOX_BASE_URL, or a test's live server) replaces it.
"""
from __future__ import annotations

import threading
import time

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

_lock = threading.Lock()
_server: ThreadedWSGIServer | None = None
_served = {"seconds": 0.0}  # time this process's server spent in Django, for the benchmark's browser/app split


class _TimedApp:
    """The Django WSGI app, timing each request (the body is built before the handler returns it)."""

    def __init__(self) -> None:
        self.app = WSGIHandler()

    def __call__(self, environ, start_response):
        start = time.perf_counter()
        try:
            return self.app(environ, start_response)
        finally:
            with _lock:
                _served["seconds"] += time.perf_counter() - start


def server_seconds() -> float:
    """Seconds this process's sandbox server has spent in Django so far."""
    return _served["seconds"]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args) -> None:  # the sandbox keeps its own request log
        pass


def sandbox_base_url() -> str:
    """Where the harness reaches the sandbox sites: the configured URL, else this process's own server."""
    configured = getattr(settings, "SANDBOX_BASE_URL", "")
    return configured.rstrip("/") if configured else sandbox_server_start()


def sandbox_server_start() -> str:
    global _server
    with _lock:
        if _server is None:
            server = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler, allow_reuse_address=False)
            server.daemon_threads = True
            server.set_app(_TimedApp())
            threading.Thread(target=server.serve_forever, name="sandbox-server", daemon=True).start()
            _server = server
        host, port = _server.server_address[:2]
    return f"http://{host}:{port}"
