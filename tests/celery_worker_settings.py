"""Settings for a Celery worker started by a test: the app's settings, on the test's database.

The test passes its database name (test_<name> on PostgreSQL, the test file on SQLite) in TASKGEN_WORKER_DB_NAME.
"""
import os

from taskgen.settings import *  # noqa: F403
from taskgen.settings import DATABASES

DATABASES["default"]["NAME"] = os.environ["TASKGEN_WORKER_DB_NAME"]
