"""The Celery app. Workers: `celery -A taskgen worker -Q default,judge,browser`."""
import logging
import os
import pkgutil

from celery import Celery
from celery.signals import task_postrun, task_prerun

import taskgen.stages
from taskgen.logs import task_log_connect

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")


def stage_packages() -> list[str]:
    """The stage folders (taskgen/stages/<stage>/), each a package that may hold a tasks module."""
    return [f"taskgen.stages.{info.name}" for info in pkgutil.iter_modules(taskgen.stages.__path__) if info.ispkg]


app = Celery("taskgen")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each stage's Celery tasks live in its folder (taskgen/stages/<stage>/tasks.py); the engine's in taskgen/engine/.
app.autodiscover_tasks(lambda: ["taskgen.engine", *stage_packages()])


def _not_the_embedded_brokers_hostname(record: logging.LogRecord) -> bool:
    # The embedded broker (filesystem://) has no host by design; kombu says so at every connection.
    return "No hostname was supplied" not in record.getMessage()


logging.getLogger("kombu.connection").addFilter(_not_the_embedded_brokers_hostname)

task_log_connect(task_prerun, task_postrun)  # one JSON line per task, with its run, unit and episode ids
