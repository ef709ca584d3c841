"""Writing an episode in the reference run-dir format: grade_inputs.json, screenshots/, final.png and rows/."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class EpisodeRecord:
    """Everything an episode produced; `error` set means the harness failed (the episode is recorded as failed)."""

    task: dict
    agent: str
    actions: list[dict] = field(default_factory=list)
    answer: str = ""
    log: list[dict] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    shots: list[bytes] = field(default_factory=list)  # one per step, the screen the agent acted on
    final_shot: bytes | None = None
    rows: list[dict] = field(default_factory=list)  # training rows: performed actions only, numbered from 1
    row_screens: list[int] = field(default_factory=list)  # per row, the step (screenshot) it was taken from
    targets: list[dict] = field(default_factory=list)  # the element each click/type/select named, with its box
    verifier: dict | None = None  # {ok, parts}
    error: str = ""
    error_final: bool = False  # the error would come again on another try (a model server's permanent refusal)
    finished: str = ""  # how it ended: taskgen/endings.py lists the kinds (done, step_limit, error, ...)
    end_reason: str = ""  # why it ended, in words, when not by the agent's own done
    end_step: int = 0  # the step it ended at (0: before the first step)
    observations: list[dict] = field(default_factory=list)  # per step, what the agent was given: url, elements, text
    time: dict = field(default_factory=dict)  # the episode's browser time and the agent's own, each with its limit
    agent_steps: list[dict] = field(default_factory=list)  # a model agent's: prompt, raw output, reasoning, tokens
    agent_run: dict = field(default_factory=dict)  # a model agent's: provider, model, prompt version, tokens, cost
    timings: dict = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        return self.task["task_id"]


def _dump(path: Path, data) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str), encoding="utf-8")


def episode_write(*, record: EpisodeRecord, run_dir: Path) -> Path:
    """The episode's folder under run_dir, written whole (a rerun overwrites it)."""
    ep = run_dir / record.task_id
    (ep / "screenshots").mkdir(parents=True, exist_ok=True)
    (ep / "rows").mkdir(exist_ok=True)
    grade = {"actions": record.actions, "answer": record.answer, "log": record.log, "changes": record.changes,
             "seen": record.seen}
    if record.targets:  # beside the reference's keys, which its readers ignore; the review page draws them
        grade["targets"] = record.targets
    if record.error:
        grade["error"] = record.error
    if record.agent_steps:  # beside the reference's keys too: the review page shows each step's reasoning
        grade["agent_steps"] = record.agent_steps
        grade["agent_run"] = record.agent_run
    # how it ended, at which step, in what time, and what the agent was given at each step: beside the reference's
    # keys too (its readers ignore them); the importer keeps them and the episode page says them
    grade.update({"finished": record.finished, "end_reason": record.end_reason, "end_step": record.end_step})
    if record.time:
        grade["time"] = record.time
    if record.observations:
        grade["observations"] = record.observations
    _dump(ep / "grade_inputs.json", grade)
    for n, png in enumerate(record.shots, start=1):
        (ep / "screenshots" / f"step_{n}.png").write_bytes(png)
    for row, screen in zip(record.rows, record.row_screens, strict=True):  # a step without a row has no row image
        (ep / "rows" / row["image"]).write_bytes(record.shots[screen - 1])
    if record.final_shot:
        (ep / "final.png").write_bytes(record.final_shot)
    rows = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in record.rows)
    (ep / "rows" / "rows.jsonl").write_text(rows, encoding="utf-8")
    _dump(ep / "rows" / "episode.json", episode_summary(record))
    return ep


def episode_summary(record: EpisodeRecord) -> dict:
    summary = {"task_id": record.task_id, "site": record.task.get("site"),
               "instruction": record.task.get("instruction"), "agent": record.agent, "steps": len(record.rows),
               "answer": record.answer, "finished": record.finished,
               "ok": None if record.verifier is None else record.verifier["ok"], "error": record.error}
    if record.end_reason:
        summary["end_reason"] = record.end_reason
    summary["end_step"] = record.end_step
    if record.agent_run:  # a model agent's model, prompt version, tokens and cost
        summary.update({k: record.agent_run[k] for k in ("model", "prompt_version", "input_tokens", "output_tokens",
                                                        "cost_usd")})
    return summary
