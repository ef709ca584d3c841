"""Celery tasks of the pipeline stage."""
