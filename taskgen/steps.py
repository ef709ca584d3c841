"""What a step is, defined once for the importer, the episode page and the run table.

A step is one action the agent took from one screen: step k (counted from 1) is the screen `step_k.png` and the k-th
action of `actions`, the one taken from that screen - a closing `done` included, as the harness records a training
row for it. So an episode has as many steps as actions. `rows.jsonl` has a row per action the browser carried out,
numbered from 1 without gaps (a model's answer that was not carried out, `{"invalid": ...}`, is a step of the
record but never a row), and `episode.json`'s `steps` counts the rows.
`final.png` is the state after the last action: a screen, not a step.

Run dirs number their step screenshots from 1 (`step_1.png` .. `step_N.png`); one that starts at `step_0.png`
numbers them from 0, and its first screen is still step 1. Where `rows.jsonl` names each row's image, that name
decides which action goes with which screen.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

_ELEMENT_LINE = re.compile(r'^\[(\d+)\]\s+(\w+)(?:\s+name=\S*)?\s+"(.*)"', re.DOTALL)


def step_count(actions) -> int:
    """The number of steps of an episode: its actions, one per screen."""
    return len(actions) if isinstance(actions, list) else 0


@dataclass(frozen=True)
class Target:
    """The page element an action named by its index: what it is called, and its box on the step's screenshot."""

    index: int
    name: str
    tag: str = ""
    box: tuple[int, int, int, int] | None = None  # x, y, width, height in the screenshot's pixels


def _box(value) -> tuple[int, int, int, int] | None:
    if isinstance(value, list | tuple) and len(value) == 4 and all(isinstance(v, int | float) for v in value):
        x, y, w, h = (int(v) for v in value)
        return (x, y, w, h) if w > 0 and h > 0 else None
    return None


def targets_recorded(extra: dict | None) -> dict[int, Target]:
    """The targets the harness recorded (grade_inputs.json `targets`), by action index (counted from 0)."""
    out: dict[int, Target] = {}
    for item in (extra or {}).get("targets") or []:
        if isinstance(item, dict) and isinstance(item.get("action"), int) and isinstance(item.get("index"), int):
            out[item["action"]] = Target(item["index"], str(item.get("name") or "")[:200], str(item.get("tag") or ""),
                                         _box(item.get("box")))
    return out


def _element_name(lines, index: int) -> Target | None:
    for line in lines if isinstance(lines, list) else []:
        match = _ELEMENT_LINE.match(str(line))
        if match and int(match.group(1)) == index:
            return Target(index, match.group(3)[:200], match.group(2))
    return None


@dataclass(frozen=True)
class RowStep:
    """One row of rows.jsonl as the page reads it: the screen it names and the element its action named."""

    image: str
    target: Target | None
    action: object = None  # the row's action as recorded: its keys in the file's order (jsonb keeps no key order)


def rows_steps(rows_jsonl: str) -> list[RowStep]:
    """Each training row's image and (from the row's element list) the name of the element its action named."""
    out = []
    for line in (rows_jsonl or "").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        action = row.get("action")
        params = next(iter(action.values()), None) if isinstance(action, dict) and len(action) == 1 else None
        index = params.get("index") if isinstance(params, dict) else None
        target = _element_name(row.get("elements"), index) if isinstance(index, int) else None
        out.append(RowStep(str(row.get("image") or ""), target, action))
    return out


def screen_actions(step_numbers: list[int], names: list[str], rows: list[RowStep]) -> list[int | None]:
    """For each step screenshot (its number and file name), the index of the action taken from it, or None.

    The rows' image names decide when they name these screens and there is a row for every step; otherwise
    numbering starts at the smallest step number when that is 0, else at 1 (a missing screenshot leaves the others
    where they are). Fewer rows than steps means steps without a row (a model's answer that was not carried out):
    the rows are numbered over the performed actions alone, so their image names are not the screens'.
    """
    by_image = {row.image: n for n, row in enumerate(rows) if row.image}
    every_step = len(rows) >= max(step_numbers, default=0)
    if by_image and every_step and any(name in by_image for name in names):
        return [by_image.get(name) for name in names]
    first = 0 if step_numbers and min(step_numbers) == 0 else 1
    return [number - first if number >= first else None for number in step_numbers]
