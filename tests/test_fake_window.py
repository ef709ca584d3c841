"""A fake model server tells when the calls since its window began arrived and were answered: the judge benchmark
(bench/judge_process.py) splits a whole process's wall into its start, its calls and its end by it."""
from __future__ import annotations

import json
import time
import urllib.request

from tests.fakes.gemini_server import FakeGemini
from tests.test_fake_keeps import _post


def _window(base_url: str, *, reset: bool = False) -> dict:
    url = base_url + "/_fake/window" + ("?reset=1" if reset else "")
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (our own fake on 127.0.0.1)
        return json.loads(answer.read())


def test_the_window_spans_the_first_arrival_to_the_last_answer_and_starts_again_on_reset():
    fake = FakeGemini(latency=0.05).start()
    try:
        assert _window(fake.base_url) == {"first": None, "last": None, "calls": 0}
        before = time.time()
        _post(fake.base_url)
        _post(fake.base_url)
        after = time.time()
        window = _window(fake.base_url, reset=True)
        assert window["calls"] == 2
        assert before <= window["first"] < window["last"] <= after
        assert window["last"] - window["first"] >= 2 * 0.05  # two calls one after the other, each its latency
        assert _window(fake.base_url) == {"first": None, "last": None, "calls": 0}
    finally:
        fake.stop()


class _SlowToReturn(FakeGemini):
    """A fake whose thread is held up after its answer went out, as a loaded machine's scheduler may hold it."""

    def _handle(self, handler) -> None:
        super()._handle(handler)
        time.sleep(0.2)


def test_the_last_answer_is_stamped_when_it_is_sent_not_when_the_server_thread_gets_back_to_it():
    fake = _SlowToReturn().start()
    try:
        _post(fake.base_url)
        read = time.time()  # the client has the whole answer in hand
        time.sleep(0.3)  # the server thread has returned by now
        assert _window(fake.base_url)["last"] <= read
    finally:
        fake.stop()


def test_a_call_is_in_the_window_as_soon_as_its_answer_is_out_even_when_the_server_thread_is_held_up():
    fake = _SlowToReturn().start()  # its thread returns 0.2 s after the answer went out
    try:
        _post(fake.base_url)
        window = _window(fake.base_url)  # read at once, while the server thread is still held up
        assert window["calls"] == 1
        assert window["last"] is not None
    finally:
        fake.stop()
