"""The Celery app. Workers: `celery -A taskgen worker -Q default,judge,browser`."""
import logging
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

from taskgen.logs import task_log_connect

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")

app = Celery("taskgen")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _not_the_embedded_brokers_hostname(record: logging.LogRecord) -> bool:
    # The embedded broker (filesystem://) has no host by design; kombu says so at every connection.
    return "No hostname was supplied" not in record.getMessage()


logging.getLogger("kombu.connection").addFilter(_not_the_embedded_brokers_hostname)

task_log_connect(task_prerun, task_postrun)  # one JSON line per task, with its run, unit and episode ids
