"""The benchmarks' cache of real screenshots (bench/real_screens.py) is a cache only once the sandbox harness's
command succeeded: a run that failed part way (on a fresh machine, before Chromium was installed) left most episode
folders with their final.png, and a check on those files took the half run as the corpus every benchmark judged."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import real_screens


class _Harness:
    """Stands in for `manage.py migrate` and `manage.py taskgen attempt`: writes a run dir as the harness does, and
    fails on the attempt when told to, after writing part of it."""

    def __init__(self, var: Path) -> None:
        self.run_dir = var / "data" / "attempts" / real_screens.HARNESS_RUN
        self.attempts = 0
        self.fail = False

    def __call__(self, command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        if "attempt" not in command:
            return subprocess.CompletedProcess(command, 0)
        self.attempts += 1
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "tasks.jsonl").write_text('{"task_id": "t1"}\n')
        (self.run_dir / "ep1").mkdir(exist_ok=True)
        (self.run_dir / "ep1" / "final.png").write_bytes(real_screens.PNG_SIGNATURE)
        if self.fail:
            raise subprocess.CalledProcessError(1, command)
        return subprocess.CompletedProcess(command, 0)


@pytest.fixture
def harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Harness:
    fake = _Harness(tmp_path / "harness")
    monkeypatch.setattr(real_screens, "HARNESS_VAR", tmp_path / "harness")
    monkeypatch.setattr(real_screens.subprocess, "run", fake)
    return fake


def test_a_failed_harness_run_is_made_again_not_taken_as_the_corpus(harness: _Harness) -> None:
    harness.fail = True
    with pytest.raises(subprocess.CalledProcessError):
        real_screens.harness_run_dir()
    assert (harness.run_dir / "ep1" / "final.png").exists()  # what a check on final.png would have taken

    harness.fail = False
    assert real_screens.harness_run_dir() == harness.run_dir
    assert harness.attempts == 2


def test_a_finished_harness_run_is_used_again_without_running(harness: _Harness) -> None:
    first = real_screens.harness_run_dir()
    assert real_screens.harness_run_dir() == first
    assert harness.attempts == 1
