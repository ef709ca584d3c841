"""The Celery app. Workers: `celery -A taskgen worker -Q default,judge,browser`."""
import logging
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

from taskgen.broker_files import broker_files_use
from taskgen.logs import task_log_connect
from taskgen.stages import stage_packages

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")


broker_files_use()  # the embedded broker writes each message whole (taskgen/broker_files.py)
app = Celery("taskgen")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each stage's Celery tasks live in its folder (taskgen/stages/<stage>/tasks.py); the engine's in taskgen/engine/.
app.autodiscover_tasks(lambda: ["taskgen.engine", *stage_packages()])


def _not_the_embedded_brokers_hostname(record: logging.LogRecord) -> bool:
    # The embedded broker (filesystem://) has no host by design; kombu says so at every connection.
    return "No hostname was supplied" not in record.getMessage()


logging.getLogger("kombu.connection").addFilter(_not_the_embedded_brokers_hostname)

task_log_connect(task_prerun, task_postrun)  # one JSON line per task, with its run, unit and episode ids
