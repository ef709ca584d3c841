"""The settings of a test run: the app's own, except that under pytest-xdist (`-n 2`) each worker process (gw0,
gw1, ...) has a var folder and a Redis database of its own.

Two workers sharing the filesystem broker's folder or a Redis database would take each other's Celery messages (a
worker started by one test working another test's run, on the wrong database) and share rate-limit windows and
login counts. So worker gwN gets TASKGEN_VAR_DIR/gwN (its broker folder, its SQLite test database) and Redis
database base+N of each Redis URL (redis://host:6379/0 -> /0, /1, ...). The change is made in the environment, once:
every process a test starts (a Celery worker, manage.py, gunicorn) inherits it. pytest-django names each worker's
PostgreSQL test database itself (test_NAME_gw0, ...).
"""
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

_REDIS_VARIABLES = ("CELERY_BROKER_URL", "REDIS_URL", "TASKGEN_CACHE_URL")


def _redis_database_moved(url: str, by: int) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    database = int(parts.path.strip("/") or 0) + by
    return urlunsplit(parts._replace(path=f"/{database}"))


def _own_worker_environment(worker: str) -> None:
    index = int(worker.removeprefix("gw"))
    base = Path(os.environ.get("TASKGEN_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["TASKGEN_VAR_DIR"] = str(base / worker)
    for name in _REDIS_VARIABLES:
        if os.environ.get(name):
            os.environ[name] = _redis_database_moved(os.environ[name], index)
    os.environ["TASKGEN_TEST_WORKER"] = worker  # done: a process started by a test keeps what it was given


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and os.environ.get("TASKGEN_TEST_WORKER") != _worker:
    _own_worker_environment(_worker)

# The test database's migrations run on the media root (0029 renames a store's blobs): a folder of the tests' own, so
# a test run never touches the app's own store (each test then writes blobs to its own folder: tests/conftest.py).
os.environ.setdefault("TASKGEN_MEDIA_ROOT", str(Path(os.environ.get("TASKGEN_VAR_DIR") or
                                                     Path(__file__).resolve().parent.parent / "var") / "test-media"))

from taskgen.settings import *  # noqa: E402, F403
