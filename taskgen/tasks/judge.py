"""Celery tasks of the judge stage."""
