"""WSGI entry point: a gunicorn worker imports it after the fork, loads the app, and settles (taskgen/web_worker.py)."""
import os

from django.core.wsgi import get_wsgi_application

from taskgen.web_worker import web_worker_settle

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
application = get_wsgi_application()
web_worker_settle()
