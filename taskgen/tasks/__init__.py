"""Celery tasks, one module per stage; each task takes ids, loads, and calls one stage function."""
from taskgen.tasks import attempt, judge, pipeline  # noqa: F401  (registers the tasks with Celery)
