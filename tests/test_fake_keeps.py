"""The fakes keep what they were sent for the tests' looks; by themselves (serving a benchmark) they keep nothing,
so a long benchmark does not measure a fake slowed by gigabytes of kept screenshots."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.fakes.gemini_server import FakeGemini

ROOT = Path(__file__).resolve().parent.parent
CALL = "/v1beta/models/fake:generateContent"
BODY = {"contents": [{"role": "user", "parts": [{"text": "judge this"}]}]}


def _post(base_url: str) -> dict:
    request = urllib.request.Request(base_url + CALL, data=json.dumps(BODY).encode(),  # noqa: S310 (our fake)
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (our own fake on 127.0.0.1)
        return json.loads(answer.read())


def test_a_fake_in_a_test_keeps_each_request_and_one_told_not_to_keeps_none():
    kept, bare = FakeGemini().start(), FakeGemini(keep_requests=False).start()
    try:
        assert _post(kept.base_url)["candidates"] and _post(bare.base_url)["candidates"]
        assert [r["body"] for r in kept.requests] == [BODY]
        assert bare.requests == []
    finally:
        kept.stop()
        bare.stop()


def test_a_fake_serving_by_itself_answers_and_keeps_nothing_unless_asked():
    for flags, kept in (([], 0), (["--keep-requests"], 1)):
        process = subprocess.Popen([sys.executable, "-m", "tests.fakes.gemini_server", *flags], cwd=ROOT,
                                   stdout=subprocess.PIPE, text=True)
        try:
            base_url = process.stdout.readline().strip()
            assert _post(base_url)["candidates"]
            with urllib.request.urlopen(base_url + "/_fake/in-flight", timeout=10) as answer:  # noqa: S310
                assert json.loads(answer.read())["kept"] == kept
        finally:
            process.terminate()
            process.wait(10)
