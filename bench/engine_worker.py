"""The Celery app with bench/engine_stage.py's no-op stage registered: `celery -A bench.engine_worker worker -B`
(bench/engine.py starts it to time a killed worker's run to its end)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")

from celery.signals import worker_init  # noqa: E402

from taskgen.celery import app  # noqa: E402, F401  (the app Celery runs)


@worker_init.connect
def _register(**_: object) -> None:
    """Django is set up by now; the pool's processes are forked after this, with the stage registered."""
    import django

    django.setup()
    from bench.engine_stage import register

    register(batch=int(os.environ.get("BENCH_ENGINE_BATCH", "10")))
