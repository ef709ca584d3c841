"""The episode page's steps: each screenshot captioned with the action taken from it (taskgen/steps.py says what a
step is), each action with the name of the element it named, and the click target's box where it was recorded.

Plain data for templates, which escape it.
"""
from __future__ import annotations

from dataclasses import dataclass

from review.page_text import PAGE_SHOWN, text_clip
from taskgen.citations import evidence_text
from taskgen.models import Episode, Screenshot
from taskgen.steps import Target, rows_steps, screen_actions, targets_recorded


def action_line(action) -> str:
    """One action as recorded: `name {params}` (actions are one-key objects {name: params})."""
    if isinstance(action, dict) and len(action) == 1:
        name, params = next(iter(action.items()))
        return f"{name} {evidence_text(params)}".strip()
    return evidence_text(action)


def target_label(target: Target | None) -> str:
    """The element an action named, in words: `button "Add to cart"`."""
    if target is None:
        return ""
    name = f'"{target.name}"' if target.name else "(no name)"
    return f"{target.tag} {name}".strip()


@dataclass
class StepAction:
    """Step `number` (from 1): the action the agent took and the element it named, if any."""

    number: int
    action: str
    target: str
    box: tuple[int, int, int, int] | None
    screen: str = ""  # the file name of the screen it was taken from, when there is one
    reasoning: str = ""  # a model agent's reasoning for this action (untrusted text: templates escape it)
    given: AgentView | None = None  # what the agent was given at this step, where the harness recorded it


@dataclass(frozen=True)
class AgentView:
    """What the agent was given at one step (grade_inputs.json `observations`): the page's address and title, its
    numbered elements as the agent read them, and the page's text; each cut to what a page can show."""

    url: str
    title: str
    elements: list[str]
    elements_total: int
    text: str
    text_total: int


ELEMENTS_SHOWN = 400  # element lines of one step on the page


def agent_views(extra) -> dict[int, AgentView]:
    """Each step's AgentView by step number (from 1); {} when the harness recorded none."""
    recorded = extra.get("observations") if isinstance(extra, dict) else None
    views = {}
    for n, seen in enumerate(recorded if isinstance(recorded, list) else [], start=1):
        if not isinstance(seen, dict):
            continue
        step = seen.get("step") if isinstance(seen.get("step"), int) else n
        lines = [str(line) for line in seen.get("elements") or []] if isinstance(seen.get("elements"), list) else []
        text = str(seen.get("text") or "")
        views[step] = AgentView(text_clip(str(seen.get("url") or "")), text_clip(str(seen.get("title") or "")),
                                [text_clip(line, 500) for line in lines[:ELEMENTS_SHOWN]], len(lines),
                                text_clip(text, PAGE_SHOWN), len(text))
    return views


@dataclass
class Screen:
    """One screenshot in the viewer: a step's screen (captioned with that step's action) or the final screen."""

    index: int
    name: str
    url: str
    thumb_url: str
    width: int
    height: int
    step: StepAction | None
    is_final: bool

    @property
    def caption(self) -> str:
        if self.is_final:
            return "final state, after the last action"
        if self.step is None:
            return "(no action was recorded from this screen)"
        on = f" → {self.step.target}" if self.step.target else ""
        return f"step {self.step.number}: {self.step.action}{on}"


def _targets(episode: Episode) -> tuple[dict[int, Target], list]:
    recorded = targets_recorded(episode.extra if isinstance(episode.extra, dict) else {})
    rows = rows_steps(episode.rows_jsonl) if episode.has_rows else []
    if not recorded:  # a run dir from before the harness recorded targets: the rows' element lists name them
        recorded = {n: row.target for n, row in enumerate(rows) if row.target}
    return recorded, rows


def _reasoning_and_thought(step: dict) -> str:
    """A step's reasoning (the server's `reasoning_content`, a <think> block) and the thought its answer stated,
    both: the second labelled where there are two."""
    reasoning, thought = str(step.get("reasoning") or "").strip(), str(step.get("thought") or "").strip()
    if reasoning and thought and thought not in reasoning:
        return f"{reasoning}\n\nStated thought: {thought}"
    return reasoning or thought


def agent_reasoning(extra) -> list[str]:
    """A model agent's reasoning per action (grade_inputs.json `agent_steps`, one per step), "" where it gave none."""
    steps = extra.get("agent_steps") if isinstance(extra, dict) else None
    return [_reasoning_and_thought(s)[:4000] if isinstance(s, dict) else "" for s in steps or []]


def agent_run(extra) -> dict:
    """A model agent's episode summary (provider, model, prompt version, tokens, cost), {} for other agents."""
    run = extra.get("agent_run") if isinstance(extra, dict) else None
    return run if isinstance(run, dict) else {}


def _as_recorded(actions: list, rows: list) -> list:
    """The actions with each one's keys in recorded order: PostgreSQL's jsonb stores an object's keys in its own
    order, so where rows.jsonl (kept as text) holds the same action, its order is the one shown."""
    return [rows[n].action if n < len(rows) and rows[n].action == action else action
            for n, action in enumerate(actions)]


def episode_steps(episode: Episode) -> tuple[list[StepAction], list[Screen]]:
    """The episode's steps (one per action) and its screens in order, each step screen tied to its step."""
    targets, rows = _targets(episode)
    actions = _as_recorded(episode.actions if isinstance(episode.actions, list) else [], rows)
    reasons, given = agent_reasoning(episode.extra), agent_views(episode.extra)
    steps = [StepAction(n + 1, text_clip(action_line(a)), text_clip(target_label(targets.get(n))),
                        getattr(targets.get(n), "box", None),
                        reasoning=reasons[n] if n < len(reasons) else "", given=given.get(n + 1))
             for n, a in enumerate(actions)]
    shots = list(getattr(episode, "screen_list", []))
    step_shots = [s for s in shots if s.kind == Screenshot.Kind.STEP]
    taken = screen_actions([s.step for s in step_shots], [s.name for s in step_shots], rows)
    action_of = {s.pk: i for s, i in zip(step_shots, taken, strict=True)}
    screens = []
    for n, shot in enumerate(shots):
        i = action_of.get(shot.pk)
        step = steps[i] if i is not None and 0 <= i < len(steps) else None
        if step is not None:
            step.screen = shot.name
        screens.append(Screen(n, shot.name, shot.blob.get_absolute_url(), shot.blob.get_thumbnail_url(),
                              shot.blob.width or 0, shot.blob.height or 0, step, shot.kind == Screenshot.Kind.FINAL))
    return steps, screens


def screen_text_kind(episode: Episode, screens: list[Screen], recorded_here: bool = False) -> dict:
    """What the recorded `seen` text is, so the page names it right: the last page's text when the harness kept a
    page's text per step (or recorded the episode here); otherwise (one entry, no screenshots) it is whatever the
    run recorded, and runs from the live web such as Online-Mind2Web record the agent's last thought there."""
    seen = episode.screen_text if isinstance(episode.screen_text, list) else []
    if recorded_here and not seen:
        return {"title": "Screen text at the end", "note": "The episode ended before the agent saw a page."}
    if screens or len(seen) > 1 or recorded_here:
        return {"title": "Screen text at the end", "note": "The text of the last page the agent saw."}
    return {"title": "Last recorded text (not necessarily the page)",
            "note": "This run kept one text for the episode and no screenshots: runs from the live web (such as "
                    "Online-Mind2Web) record the agent's last thought here, not the page's text."}
