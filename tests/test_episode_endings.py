"""How an episode ended is read from its run dir once (taskgen/endings.py) and said the same way everywhere: a run
dir written while the harness kept the wrong end reason of a failed episode ("the step limit (20) was reached" on
an episode that failed at step 1) is imported with its harness error; one from before the harness recorded the step
says it by its actions; another harness's run dir that says nothing is shown as recorded."""
from __future__ import annotations

import json

import pytest

from taskgen.endings import ending_of
from taskgen.models import Episode
from taskgen.stages.import_.service import import_run_dir

pytestmark = pytest.mark.django_db


def _run_dir(tmp_path, episodes: dict[str, tuple[dict, dict | None]]):
    run_dir = tmp_path / "run"
    for task_id, (grade, summary) in episodes.items():
        ep = run_dir / task_id
        (ep / "rows").mkdir(parents=True)
        (ep / "grade_inputs.json").write_text(json.dumps(grade), encoding="utf-8")
        if summary is not None:
            (ep / "rows" / "episode.json").write_text(json.dumps(summary), encoding="utf-8")
    tasks = "".join(json.dumps({"task_id": t, "site": "shop", "instruction": f"Do {t} on the shop.",
                                "task_kind": "action"}) + "\n" for t in episodes)
    (run_dir / "tasks.jsonl").write_text(tasks, encoding="utf-8")
    import_run_dir(run_dir=run_dir, tasks_file=run_dir / "tasks.jsonl", name="endings")
    return {e.task.task_id: e for e in Episode.objects.select_related("task")}


def _grade(actions: int, **keys) -> dict:
    return {"actions": [{"click": {"index": 1}}] * (actions - 1) + [{"done": {}}] * (actions > 0), "answer": "",
            "log": [], "changes": [], "seen": [], **keys}


def test_the_ending_is_imported_from_the_run_dir_and_a_lost_failure_reason_is_found_again(tmp_path):
    error = "AgentError: the model failed at step 1: openai-compatible unreachable"
    episodes = _run_dir(tmp_path, {
        "t-lost": (_grade(0, error=error, end_reason="the step limit (20) was reached"),
                   {"finished": "error", "end_reason": "the step limit (20) was reached", "error": error}),
        "t-old-done": (_grade(4), {"finished": "done"}),
        "t-new": (_grade(3, finished="bad_element", end_reason="step 3: click element 99, which does not exist",
                         end_step=3), None),
        "t-gave-up": (_grade(2, finished="gave_up", end_reason="could not find the element to act on", end_step=2),
                      None),
        "t-silent": (_grade(2), None),
    })
    lost = episodes["t-lost"]
    assert (lost.status, lost.finished, lost.end_reason, lost.failure_reason) == (
        Episode.Status.FAILED, "error", error, error)
    assert "step limit" not in lost.ending.sentence and lost.end_step is None
    assert lost.ending.sentence == f"Ended: the episode failed in the harness — {error}"
    assert (episodes["t-old-done"].finished, episodes["t-old-done"].end_step) == ("done", 4)
    new = episodes["t-new"]
    assert new.status == Episode.Status.RECORDED and new.ending.short == "bad element at step 3"
    assert new.ending.sentence == ("Ended at step 3: the agent named an element the page does not have — step 3: "
                                   "click element 99, which does not exist")
    assert "end_reason" not in new.extra and "finished" not in new.extra  # fields of their own, not extra
    assert episodes["t-gave-up"].ending.short == "gave up at step 2"
    assert episodes["t-silent"].ending.short == "" and episodes["t-silent"].status == Episode.Status.RECORDED


@pytest.mark.parametrize("finished,step,reason,short,sentence", [
    ("done", 4, "", "done at step 4", "Ended at step 4: the agent said it was done"),
    ("step_limit", 20, "the step limit (20) was reached", "step limit at step 20",
     "Ended at step 20: the step limit (20) was reached"),
    ("error", 0, "Error: net::ERR_CONNECTION_REFUSED", "failed before the first step",
     "Ended before the first step: the episode failed in the harness — Error: net::ERR_CONNECTION_REFUSED"),
    ("cannot_attempt", 0, "it has no known solution", "cannot attempt",
     "Ended before the first step: the agent cannot attempt this task — it has no known solution"),
    ("their_own", 2, "", "their_own at step 2", "Ended at step 2: it ended as 'their_own'"),
])
def test_each_ending_is_said_in_words(finished, step, reason, short, sentence):
    ending = ending_of(finished=finished, end_reason=reason, end_step=step)
    assert (ending.short, ending.sentence) == (short, sentence)
