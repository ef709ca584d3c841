"""The Celery app. Workers: `celery -A taskgen worker -Q default,judge,browser`."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")

app = Celery("taskgen")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
