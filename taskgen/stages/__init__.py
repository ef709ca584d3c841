"""Pipeline stages: plain functions over models and files that Celery tasks, the CLI and views all call."""
