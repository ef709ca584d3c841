"""Celery tasks of the attempt stage."""
