"""Taskgen Review: the Django project package and the pipeline app (models, stages, providers, harness, tasks).

The Celery app (taskgen/celery.py) is imported where it is used: by a worker or beat (`celery -A taskgen` finds
taskgen.celery), and by whatever sends a message (taskgen/engine/send.py); not at every process's start, where it cost
85 ms of each command's CPU. `taskgen.celery_app` still names it.
"""


def __getattr__(name: str):
    if name == "celery_app":
        from taskgen.celery import app

        return app
    raise AttributeError(f"module 'taskgen' has no attribute {name!r}")
