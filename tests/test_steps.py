"""One definition of a step: each screenshot is captioned with the action taken from it, and every count agrees."""
from __future__ import annotations

import json

import pytest

from review.workbench import episode_for_workbench
from review.workbench_steps import action_line, episode_steps
from taskgen.blobs import blob_store_image
from taskgen.models import Screenshot
from taskgen.steps import rows_steps, screen_actions, step_count
from tests.factories import EpisodeFactory
from tests.rundirs import png

# sb-shop-017 as the harness records it: the first screen is where the agent typed, the ninth where it said done.
ACTIONS = [{"type": {"index": 2, "text": "Brazil Santos Bourbon", "submit": True}}, {"click": {"index": 8}},
           {"type": {"index": 5, "text": "2"}}, {"click": {"index": 6}}, {"click": {"index": 3}},
           {"type": {"index": 1, "text": "Ada"}}, {"select": {"index": 4, "value": "express"}},
           {"click": {"index": 9}}, {"done": {}}]
NAMES = {0: ("input", "Search the shop"), 1: ("a", "Brazil Santos Bourbon"), 3: ("button", "Add to cart"),
         7: ("button", "Place order")}


def _rows() -> str:
    rows = []
    for n, action in enumerate(ACTIONS):
        index = next(iter(action.values())).get("index")
        tag, name = NAMES.get(n, ("a", f"element {index}"))
        elements = [f'[{i}] a "other {i}"' for i in range(12) if i != index] + [f'[{index}] {tag} "{name}"']
        rows.append({"task_id": "sb-shop-017", "step": n + 1, "action": action, "elements": elements,
                     "image": f"step_{n + 1}.png"})
    return "".join(json.dumps(r) + "\n" for r in rows)


def _episode(*, first: int = 1, rows: bool = True, targets: bool = False):
    extra = {"targets": [{"action": 3, "step": 4, "index": 6, "tag": "button", "name": "Add to cart",
                          "box": [100, 200, 80, 30]}]} if targets else {}
    episode = EpisodeFactory(actions=ACTIONS, steps=len(ACTIONS), rows_jsonl=_rows() if rows else "", has_rows=rows,
                             extra=extra)
    for n in range(len(ACTIONS)):
        Screenshot.objects.create(episode=episode, step=first + n, name=f"step_{first + n}.png",
                                  blob=blob_store_image(data=png((n * 20, 10, 10), size=(320, 200))))
    Screenshot.objects.create(episode=episode, kind="final", step=first + len(ACTIONS), name="final.png",
                              blob=blob_store_image(data=png((0, 0, 0), size=(320, 200))))
    return episode_for_workbench(episode.pk)


def test_a_step_is_an_action_the_closing_done_included():
    assert step_count(ACTIONS) == 9 and step_count(None) == 0


@pytest.mark.django_db
@pytest.mark.parametrize("rows", [True, False])
def test_screenshot_i_is_captioned_with_the_action_taken_from_it(rows):
    episode = _episode(rows=rows)
    steps, screens = episode_steps(episode)
    assert len(steps) == 9 and len(screens) == 10
    assert episode.actions[0] == ACTIONS[0]
    # PostgreSQL's jsonb keeps an action's keys in its own order: with rows.jsonl (kept as text) the caption reads
    # the action as recorded, key for key; without, as stored
    recorded = 'step 1: type {"index": 2, "text": "Brazil Santos Bourbon", "submit": true}'
    assert screens[0].caption.startswith(recorded if rows else f"step 1: {action_line(episode.actions[0])}")
    assert "Brazil Santos Bourbon" in screens[0].caption
    assert screens[8].caption == "step 9: done" and screens[9].caption == "final state, after the last action"
    assert [s.step.number for s in screens[:9]] == list(range(1, 10)) and screens[9].step is None
    assert [s.screen for s in steps] == [f"step_{n}.png" for n in range(1, 10)]


@pytest.mark.django_db
def test_a_run_dir_numbered_from_zero_still_starts_at_step_one():
    steps, screens = episode_steps(_episode(first=0, rows=False))
    assert screens[0].name == "step_0.png" and screens[0].step.number == 1
    assert screens[0].caption.startswith("step 1: type")


@pytest.mark.django_db
def test_clicks_name_their_element_from_the_rows_or_the_recorded_target():
    steps, _ = episode_steps(_episode())
    assert steps[0].target == 'input "Search the shop"' and steps[3].target == 'button "Add to cart"'
    assert steps[8].target == "" and steps[3].box is None  # rows name elements but record no box
    recorded, screens = episode_steps(_episode(targets=True))
    assert recorded[3].box == (100, 200, 80, 30) and screens[3].caption.endswith('→ button "Add to cart"')


def test_rows_images_decide_which_screen_an_action_came_from():
    rows = rows_steps(_rows())
    names = ["step_2.png", "step_3.png"]  # step_1.png was not imported (a bad image): the rest keep their steps
    assert screen_actions([2, 3], names, rows) == [1, 2]
    assert screen_actions([2, 3], names, []) == [1, 2]
    assert screen_actions([0, 1], ["step_0.png", "step_1.png"], []) == [0, 1]


def test_a_step_without_a_row_leaves_each_screen_with_its_own_action():
    """Five steps, the second an answer that was not carried out: four rows, numbered 1-4 over the performed actions.
    Read by the rows' image names, screen 2 took the click's caption and screen 5 none."""
    rows = rows_steps("".join(json.dumps({"step": n, "image": f"step_{n}.png", "action": {"done": {}}}) + "\n"
                              for n in (1, 2, 3, 4)))
    names = [f"step_{n}.png" for n in range(1, 6)]
    assert screen_actions([1, 2, 3, 4, 5], names, rows) == [0, 1, 2, 3, 4]


@pytest.mark.django_db
def test_the_page_says_one_step_count_everywhere(viewer_client):
    episode = _episode()
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "· 9 steps ·" in html and "Steps (9)" in html and "Actions (9)" in html
    assert 'id="step-1"' in html and 'data-caption="step 1: type' in html and 'id="step-final"' in html
    assert '<li id="act-4"><code>click {&quot;index&quot;: 6}</code> → <strong class="target-name">button' in html


@pytest.mark.django_db
def test_a_one_step_episode_says_one_step(viewer_client):
    episode = EpisodeFactory(actions=[{"done": {}}], steps=1)
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "· 1 step ·" in html and "1 steps" not in html
