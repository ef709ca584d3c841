"""The episode page takes the real online-mind2web episodes as they are (long Markdown answers, no screenshots)."""
from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from tests.factories import EpisodeFactory, SiteFactory, TaskFactory

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "online-mind2web-abp"
DATA = DATA if DATA.exists() else Path("/work/shared/data/online-mind2web-abp")

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(not (DATA / "run").exists(), reason="online-mind2web-abp data not present")]


def _tasks() -> dict[str, dict]:
    lines = (DATA / "tasks.jsonl").read_text().splitlines()
    return {t["task_id"]: t for t in map(json.loads, filter(None, lines))}


def test_real_episodes_render_with_their_evidence(viewer_client):
    tasks = _tasks()
    folders = sorted(p for p in (DATA / "run").iterdir() if (p / "grade_inputs.json").exists())[::15]
    assert folders
    for folder in folders:
        g = json.loads((folder / "grade_inputs.json").read_text())
        raw = tasks.get(folder.name, {"instruction": folder.name, "site": "unknown"})
        task = TaskFactory(task_id=folder.name, instruction=raw["instruction"], site=SiteFactory(slug=raw["site"]))
        episode = EpisodeFactory(task=task, actions=g.get("actions") or [], answer=g.get("answer") or "",
                                 request_log=g.get("log") or [], data_changes=g.get("changes") or [],
                                 screen_text=g.get("seen") or [], steps=len(g.get("actions") or []))
        response = viewer_client.get(episode.get_absolute_url())
        assert response.status_code == 200, folder.name
        html = response.content.decode()
        if not episode.answer.strip():
            assert "The agent gave no answer." in html
            continue
        first_words = re.sub(r"[*_#`|\[\]]", "", episode.answer.strip().splitlines()[0])[:30].strip()
        text = unescape(re.sub(r"<[^>]+>", "", html))
        assert 'class="markdown answer clamped"' in html and first_words in text, folder.name
        assert "No screenshots were recorded" in html
