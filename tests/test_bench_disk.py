"""The benchmarks say how this machine treats memory (bench/disk.py), read from the kernel's DAMON sysfs tree: a
running kdamond with a pageout scheme pages out memory idle for its minimum age, which is what makes a process's
start or a table read a minute later go to the disk again."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import disk


def _kdamond(root: Path, *, state: str = "on", action: str = "pageout", age: int = 12, aggr_us: int = 5_000_000,
             quota: int = 134_217_728, every_ms: int = 1000) -> None:
    kdamond = root / "0"
    context = kdamond / "contexts" / "0"
    scheme = context / "schemes" / "0"
    files = {kdamond / "state": state, context / "monitoring_attrs" / "intervals" / "aggr_us": aggr_us,
             scheme / "action": action, scheme / "access_pattern" / "age" / "min": age,
             scheme / "quotas" / "bytes": quota, scheme / "quotas" / "reset_interval_ms": every_ms}
    for path, value in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")


@pytest.fixture
def admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(disk, "DAMON_ADMIN", tmp_path)
    return tmp_path


def test_a_running_pageout_scheme_is_told_with_its_idle_age_and_rate(admin: Path) -> None:
    _kdamond(admin)
    assert disk.proactive_reclaim() == "memory idle 60 s paged out (DAMON, up to 128 MB every 1 s)"


@pytest.mark.parametrize("kwargs", [{"state": "off"}, {"action": "stat"}])
def test_a_stopped_kdamond_or_another_action_is_no_reclaim(admin: Path, kwargs: dict) -> None:
    _kdamond(admin, **kwargs)
    assert disk.proactive_reclaim() == "no proactive reclaim"


def test_a_machine_without_damon_has_no_reclaim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disk, "DAMON_ADMIN", tmp_path / "absent")
    assert disk.proactive_reclaim() == "no proactive reclaim"


def test_what_cannot_be_read_is_said(admin: Path) -> None:
    _kdamond(admin, age="twelve")
    assert disk.proactive_reclaim().startswith("proactive reclaim unknown")
