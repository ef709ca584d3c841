"""A web worker's start (taskgen/wsgi.py, taskgen/web_worker.py)."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from taskgen.web_worker import web_worker_settle


def test_settling_freezes_the_objects_alive_then_out_of_the_collectors_sight():
    try:
        web_worker_settle()
        assert gc.get_freeze_count() > 10_000  # Django's, the app's, every view module's
    finally:
        gc.unfreeze()


def test_a_process_serving_the_app_has_imported_every_view_and_frozen_them_once_loaded():
    """What gunicorn imports (taskgen.wsgi) leaves the views imported and the collector looking at almost nothing."""
    code = ("import gc, sys; import taskgen.wsgi; "
            "print(gc.get_freeze_count(), len(gc.get_objects()), 'review.views.browse' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, env=os.environ,
                          capture_output=True, text=True, timeout=120, check=True)
    frozen, seen, views = done.stdout.split()
    assert int(frozen) > 10_000 and int(seen) < 1_000 and views == "True"
