"""A caller's limit on calls in flight is held by each HTTP exchange only while it is on the wire (providers/
exchanges.py, taken and given back by the providers' transport), never by the SDK's work on either side of it."""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2 as httpx
import pytest

from taskgen.providers.body_deadline import BodyDeadlineTransport
from taskgen.providers.exchanges import exchanges_limited


class Places:
    """A limit of `limit` places that records how many were held at once, and when."""

    def __init__(self, limit: int) -> None:
        self._free = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.held = self.peak = self.taken = 0

    def __enter__(self) -> Places:
        self._free.acquire()
        with self._lock:
            self.held += 1
            self.taken += 1
            self.peak = max(self.peak, self.held)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.held -= 1
        self._free.release()


class _Slow(BaseHTTPRequestHandler):
    in_flight = peak = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with _Slow.lock:
            _Slow.in_flight += 1
            _Slow.peak = max(_Slow.peak, _Slow.in_flight)
        time.sleep(0.2)
        with _Slow.lock:
            _Slow.in_flight -= 1
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    _Slow.in_flight = _Slow.peak = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _client() -> httpx.Client:
    return httpx.Client(transport=BodyDeadlineTransport(5.0), timeout=5.0)


def test_a_place_is_held_only_while_the_exchange_is_on_the_wire(server):
    places = Places(4)
    with _client() as client, exchanges_limited(places):
        assert places.held == 0  # the SDK's building of the request holds none
        response = client.post(server, content=b"{}")
        assert response.json() == {"ok": True}
        assert places.held == 0 and places.taken == 1  # the answer read: the place is free again
    assert places.held == 0


def test_calls_beyond_the_limit_wait_for_a_place_and_the_server_never_sees_more(server):
    places = Places(2)
    client = _client()

    def call() -> None:
        with exchanges_limited(places):
            client.post(server, content=b"{}")

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    client.close()
    assert places.taken == 6 and places.held == 0
    assert places.peak == 2 and _Slow.peak == 2


def test_a_failed_exchange_gives_its_place_back():
    places = Places(1)
    with _client() as client, exchanges_limited(places):
        with pytest.raises(httpx.ConnectError):
            client.post("http://127.0.0.1:9/", content=b"{}")  # nothing listens on the discard port
        assert places.held == 0


def test_an_answer_left_unread_gives_its_place_back_when_the_call_ends(server):
    places = Places(1)
    with _client() as client:
        with exchanges_limited(places):
            request = client.build_request("POST", server, content=b"{}")
            response = client.send(request, stream=True)  # headers in, body not read
            assert places.held == 1
        assert places.held == 0
        response.close()
        assert places.held == 0 and places.taken == 1  # given back once, not twice


def test_without_a_limit_exchanges_take_no_place(server):
    with _client() as client:
        assert client.post(server, content=b"{}").json() == {"ok": True}
