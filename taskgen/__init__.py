"""Taskgen Review: the Django project package and the pipeline app (models, stages, providers, harness, tasks)."""
from taskgen.celery import app as celery_app

__all__ = ["celery_app"]
