"""A no-op stage for bench/engine.py, registered on the engine at run time (never part of the app): N units, each
sleeping `seconds` (0: nothing at all), leased `batch` at a time."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")

import django  # noqa: E402

django.setup()  # a module of bench/engine.py and bench/engine_worker.py; run alone (`make bench`) it does nothing

from taskgen.engine.contract import StageParams, StageWork  # noqa: E402
from taskgen.engine.stage_table import ENGINE_STAGES  # noqa: E402

NAME = "bench-noop"


@dataclass(frozen=True)
class NoopParams(StageParams):
    units: int = 10_000
    seconds: float = 0.0


def _do(pipeline_run, params: NoopParams, key: str) -> None:
    if params.seconds:
        time.sleep(params.seconds)


def stage(batch: int) -> StageWork:
    return StageWork(name=NAME, check=NoopParams.from_json, read=NoopParams.from_json,
                     units=lambda params: [str(n) for n in range(params.units)], do=_do,
                     finish=lambda pipeline_run, params, failed: {"units": params.units, "failed": failed},
                     queue="default", batch=batch)


def register(batch: int = 100) -> None:
    ENGINE_STAGES[NAME] = stage(batch)
