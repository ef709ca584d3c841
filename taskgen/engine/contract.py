"""What a stage tells the engine (taskgen/engine/): how to check its parameters, list its units and do one unit.

A stage is plain functions over models and files; it never queues, leases or counts. The engine queues the units,
leases them to workers, records each unit's outcome and finishes the run with the stage's summary.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any


class StageParamsError(ValueError):
    """A stage's parameters are wrong; the message says which and why (shown on the form or the command line)."""


class NothingToDo(Exception):  # noqa: N818  (an answer, not an error)
    """These parameters leave a stage nothing to work (every episode judged already): no run is made, and the form
    or the command line says so, in the stage's words, instead of listing an empty run."""


class RetryLater(Exception):  # noqa: N818  (an instruction to the engine, not an error of the unit)
    """Do this unit again in `seconds`: a busy model, a full rate window, a broker blip. The worker slot is freed
    at once (never a sleep). `counts` says whether this try counts against the unit's attempts."""

    def __init__(self, seconds: float, reason: str, *, counts: bool = False) -> None:
        super().__init__(reason)
        self.seconds = max(0.0, float(seconds))
        self.reason = reason
        self.counts = counts


class UnitFailed(RuntimeError):  # noqa: N818  (an instruction to the engine: this unit failed, for good)
    """This unit failed in a way another try now would not change (an external harness that exited non-zero or left
    the episodes it was given missing: hours of work are not run again unasked). The engine fails it at once, with
    this message; a resume runs it again."""


@dataclass(frozen=True)
class StageParams:
    """Base of a stage's typed parameters: stored with the run as JSON, read back the same way however it was
    started (web form, command line, admin action), so any run can be resumed."""

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> StageParams:
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True)
class StageWork:
    """One stage as the engine runs it.

    check(raw) -> params: validate once, at the edge; raises StageParamsError.
    units(params) -> keys: the units of a new run, in order (an empty list: nothing to do).
    do(pipeline_run, params, key) -> JSON-able result of one unit; raises RetryLater, UnitFailed to fail the unit at
        once, or any other error to fail the try (tried again up to max_attempts). A stage gives `do`, `do_batch`
        or both.
    do_batch(pipeline_run, params, keys) -> {key: result, or the exception that unit's try ended with}: optional,
        for a stage whose units are cheaper done together (one query for the batch's episodes, files written by a
        few threads); the engine then calls it once per leased batch instead of `do` per unit.
    finish(pipeline_run, params, failed) -> the run's result summary, once every unit is done or failed.
    batch_of(params) -> how many units a worker leases at once for this run (else `batch`).
    here(params, workers) -> threads: optional, for a process about to work a run's units itself with `workers`
        (`--workers N` of a command, `taskgen resume`): what it starts loading at once and how many threads it works
        them with (else `workers`).
    """

    name: str
    check: Callable[[dict], StageParams]
    units: Callable[[StageParams], list[str]]
    finish: Callable[[Any, StageParams, int], dict]
    read: Callable[[dict], StageParams]
    queue: str = "default"
    batch: int = 1
    batch_of: Callable[[StageParams], int] | None = None
    lease_seconds: int | None = None
    unit_seconds: int | None = None  # the most one unit may take, when more than a lease (the task's time limits)
    max_attempts: int = 3
    workers: int = 0  # worker messages sent per run (0: settings.ENGINE_WORKERS_PER_RUN); each is one worker slot
    nothing_to_do: str = "nothing to do"
    run_of: Callable[[StageParams], int | None] = lambda params: None
    do: Callable[[Any, StageParams, str], Any] | None = None
    do_batch: Callable[[Any, StageParams, list[str]], dict[str, Any]] | None = None
    here: Callable[[StageParams, int], int] | None = None

    def __post_init__(self) -> None:
        if self.do is None and self.do_batch is None:
            raise TypeError(f"stage {self.name!r}: give the engine `do` or `do_batch`")
