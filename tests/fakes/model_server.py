"""What every fake model server here shares: a threaded HTTP server on 127.0.0.1 (keep-alive, as real model
front ends are), a queue of scripted faults (one per incoming call), the requests it saw, and JSON answers.

A fake subclasses FakeModelServer and writes `_handle(handler)` for POSTs (and `_handle_get` when it serves GETs).
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple, Self


class _Server(ThreadingHTTPServer):
    """A listen backlog of a real front end's size: the stdlib's 5 dropped the SYNs of 16 workers connecting at
    once, and each dropped client waited out TCP's retransmits (1, 3, 7... s): seconds of nothing in a benchmark."""

    request_queue_size = 256
    daemon_threads = True


class CallsWindow(NamedTuple):
    """The calls a fake answered since its window began: the first's arrival, the last's answer, how many."""

    first: float | None = None
    last: float | None = None
    calls: int = 0

    def add(self, arrived: float, answered: float) -> CallsWindow:
        first = arrived if self.first is None else min(self.first, arrived)
        return CallsWindow(first, answered if self.last is None else max(self.last, answered), self.calls + 1)


class FakeModelServer:
    def __init__(self, *, latency: float = 0.0, retry_hint: float = 0.2, stall: float = 5.0,
                 keep_requests: bool = True) -> None:
        self.latency, self.retry_hint, self.stall = latency, retry_hint, stall
        self.requests: list[dict] = []
        # False for a fake serving a benchmark by itself: every request it kept (a judge call's body holds its
        # screenshots) stayed in memory, 10 GB after 20,000 calls, and its collector's passes over them slowed
        # the answers the benchmark timed.
        self.keep_requests = keep_requests
        self._faults: deque[str] = deque()
        self._lock = threading.Lock()
        self.in_flight = self.peak_in_flight = 0  # POSTs being answered now, and the most at once
        self._window = CallsWindow()  # when the calls since the last reset began and ended (a benchmark's timeline)
        self._server: _Server | None = None

    def remember(self, record: dict) -> None:
        """Keep a request's record in `requests` (for the tests' looks), unless this fake keeps none."""
        if self.keep_requests:
            with self._lock:
                self.requests.append(record)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def script(self, faults: list[str]) -> Self:
        """Answer the next calls with these faults, one per call, then normally."""
        with self._lock:
            self._faults.extend(faults)
        return self

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: no new connection per call
            # The headers and the body go out in two writes: with Nagle on, the body waited for the client's delayed
            # ACK of the headers, 40 ms added to every answer (real front ends send without that wait).
            disable_nagle_algorithm = True

            # A POST joins the window when its answer begins to go out (_send and _trickle call mark_answered before
            # they write), not when the handler returns: a loaded machine's scheduler could hold the thread until
            # after the client had read the answer, its clock, and even the window itself.
            arrived: float | None = None  # None: a GET, or a POST already in the window

            def mark_answered(self) -> None:
                if self.arrived is not None:
                    fake._window_add(self.arrived, time.time())
                    self.arrived = None

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                fake._count_in_flight(+1)
                self.arrived = time.time()
                try:
                    fake._handle(self)
                finally:
                    fake._count_in_flight(-1)
                    self.mark_answered()  # a call that never answered (its client gone) ends here

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/_fake/in-flight"):
                    return fake._send(self, 200, {"in_flight": fake.in_flight, "peak": fake.peak_in_flight,
                                                  "kept": len(fake.requests)})
                if self.path.startswith("/_fake/window"):
                    return fake._send(self, 200, fake._window_read(reset="reset=1" in self.path))
                fake._handle_get(self)

            def log_message(self, *args) -> None:
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def _window_add(self, arrived: float, answered: float) -> None:
        with self._lock:
            self._window = self._window.add(arrived, answered)

    def _window_read(self, *, reset: bool) -> dict:
        """The calls since the last reset: the first one's arrival and the last one's answer (Unix seconds, as
        another process's clock reads them), and how many; reset: start a new window."""
        with self._lock:
            window = self._window
            if reset:
                self._window = CallsWindow()
        return window._asdict()

    def _count_in_flight(self, change: int) -> None:
        with self._lock:
            self.in_flight += change
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    # At most this many scripted faults for one request body (None: no cap): a request sent again after that many is
    # answered, the script's next fault kept for another request. A test of faults then never sees one episode fail
    # every try by the luck of the draw (a 1-in-5 fault rate failed some episode's five tries in about 1 run in 10).
    faults_per_request: int | None = None

    def _next_fault(self, request: bytes = b"") -> str:
        with self._lock:
            met = getattr(self, "_faults_met", None)
            if met is None:
                met = self._faults_met = {}
            if self.faults_per_request is not None and met.get(request, 0) >= self.faults_per_request:
                return "ok"
            fault = self._faults.popleft() if self._faults else "ok"
            if fault != "ok":
                met[request] = met.get(request, 0) + 1
            return fault

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def _handle_get(self, handler: BaseHTTPRequestHandler) -> None:
        self._send(handler, 404, {"error": {"message": "no such route"}})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict | bytes, headers: dict | None = None,
              content_type: str = "application/json") -> bool:
        """Answer (a payload as JSON, bytes as they are); False when the client had gone (its answer never
        arrived)."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.mark_answered()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False  # the client gave up (a timeout test, a killed worker): nothing to answer
        return True

    @staticmethod
    def _trickle(handler: BaseHTTPRequestHandler, payload: dict, seconds_per_byte: float) -> None:
        """Answer 200 a byte at a time, as a slow model streaming its tokens does (each read of the client's sees
        something in time; the whole answer takes len(body) x seconds_per_byte)."""
        data = json.dumps(payload).encode()
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            for at, byte in enumerate(data, 1):
                if at == len(data):
                    handler.mark_answered()  # its last byte: the answer is whole when it arrives
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(seconds_per_byte)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on it, as it should


def serve_alone(make: Callable[..., FakeModelServer], description: str) -> None:
    """Run one fake by itself (`python -m tests.fakes.<name> --latency S`): print its base URL, serve until Ctrl-C."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--keep-requests", action="store_true",
                        help="keep every request's record (by itself a fake serves benchmarks: it keeps none)")
    args = parser.parse_args()
    server = make(latency=args.latency, keep_requests=args.keep_requests).start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
