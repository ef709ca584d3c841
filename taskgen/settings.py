"""Settings for Taskgen Review, all read from the environment (see README "Configuration").

Defaults run on a laptop with nothing installed: SQLite, an embedded filesystem broker for Celery, and the offline
`rules` judge when no GEMINI_API_KEY is set. Real services come by URL: DATABASE_URL, CELERY_BROKER_URL.
"""
from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from taskgen.concurrency import judge_threads_for
from taskgen.env import env_bool, env_float, env_int, env_path, env_secret, env_str, redis_url_with_password

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("TASKGEN_VAR_DIR", BASE_DIR / "var")

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_secret("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and env_bool("TASKGEN_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set")
    # A per-checkout key, so a laptop demo needs no setup and no key is ever committed.
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        VAR_DIR.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()

ALLOWED_HOSTS = [h.strip() for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env_str("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    "taskgen.admin_app.AdminConfig",  # django.contrib.admin, its modules discovered when used (taskgen/admin_app.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # intcomma: counts on pages read "27,644"
    "django_htmx",
    "axes",
    "csp",
    "taskgen",
    "review",
    "sandbox",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless a view says otherwise with @login_not_required.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # A NUL character in any query or form field is a 400 naming the field (PostgreSQL cannot store one).
    "taskgen.text_input.NulInputMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A 405 (a GET of an address forms post to) gets a page that says so, in the app's layout, not a blank one.
    "taskgen.method_page.MethodNotAllowedPageMiddleware",
]

ROOT_URLCONF = "taskgen.urls"
WSGI_APPLICATION = "taskgen.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "taskgen.roles.role_context",
                "taskgen.context.app_context",
            ],
        },
    },
]


# Every SQLite database gets these, however it was named (the default file or a sqlite:// DATABASE_URL, as a Celery
# worker started by a test or a user gets): without them a second process's write fails at once with "database is
# locked" instead of waiting its turn. IMMEDIATE takes the write lock when a transaction starts, so a transaction
# that reads and then writes never has to upgrade its lock (SQLite refuses that upgrade without waiting); WAL lets
# readers go on while one process writes; `timeout` is how long a writer waits for the lock.
SQLITE_OPTIONS = {"timeout": 30, "transaction_mode": "IMMEDIATE",
                  "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}


def _database() -> dict:
    url = env_str("DATABASE_URL", "")
    if not url:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        # The test database is a file, not memory, so a Celery worker started by a test can open it too.
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "db.sqlite3", "OPTIONS": dict(SQLITE_OPTIONS),
                "TEST": {"NAME": str(VAR_DIR / "test-db.sqlite3")}}
    try:
        config = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0))
    except Exception as exc:  # dj-database-url raises several types for a bad URL
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL this app understands: {exc}") from exc
    if not config.get("ENGINE"):
        raise ImproperlyConfigured("DATABASE_URL names no known database engine")
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {**SQLITE_OPTIONS, **config.get("OPTIONS", {})}
    if password := env_secret("DATABASE_PASSWORD"):  # e.g. DATABASE_PASSWORD_FILE: a Docker secret, not in the URL
        config["PASSWORD"] = password
    if config["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_POOL", True):
        config.update(_postgres_pool())
    return config


# ---- Production (issue 16): PostgreSQL connections from Django's psycopg pool. ----
# A pool per process, shared by its threads, instead of one persistent connection per thread: 20 reviewers on a
# threaded server with 60 s connection age ran PostgreSQL out of connections. DATABASE_POOL=0 turns it off
# (then DATABASE_CONN_MAX_AGE applies), e.g. behind PgBouncer.
def _judge_threads() -> int:
    """A judge worker's threads: TASKGEN_JUDGE_THREADS, else enough to keep its calls in flight back to back."""
    in_flight = env_int("TASKGEN_JUDGE_CONCURRENCY", 16, minimum=1)
    return env_int("TASKGEN_JUDGE_THREADS", judge_threads_for(in_flight), minimum=1)


def _postgres_pool() -> dict:
    low = env_int("DATABASE_POOL_MIN_SIZE", 1, minimum=0)
    # A judge worker's threads each hold a connection while their model call is in flight: room for all of them.
    judge_threads = _judge_threads()
    high = env_int("DATABASE_POOL_MAX_SIZE", max(20, judge_threads + 4), minimum=max(1, low))
    pool = {"min_size": low, "max_size": high, "timeout": env_float("DATABASE_POOL_TIMEOUT", 10.0)}
    # CONN_HEALTH_CHECKS: the pool checks each connection (an empty query) before it lends it, so one PostgreSQL
    # ended meanwhile (a restart, pg_terminate_backend) is replaced instead of failing the request or unit it went to.
    # taskgen.db_backend: Django's PostgreSQL backend whose pool renews every idle connection when it finds one dead.
    return {"ENGINE": "taskgen.db_backend", "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": True, "OPTIONS": {"pool": pool}}
# ---- end of Production (pool) ----


DATABASES = {"default": _database()}
# Covering indexes (INCLUDE columns) exist for PostgreSQL's index-only scans; SQLite builds them on their keys alone.
SILENCED_SYSTEM_CHECKS = ["models.W040"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("TASKGEN_STATIC_ROOT", VAR_DIR / "staticfiles")  # the image collects it at build
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns at every start when it is missing

# Blobs (screenshots and their thumbnails), stored once by content hash; never served without a login.
MEDIA_ROOT = env_path("TASKGEN_MEDIA_ROOT", VAR_DIR / "media")
BLOB_MAX_BYTES = env_int("TASKGEN_BLOB_MAX_BYTES", 20 * 1024 * 1024, minimum=1024)
JSON_MAX_BYTES = env_int("TASKGEN_JSON_MAX_BYTES", 50 * 1024 * 1024, minimum=1024)
THUMBNAIL_SIZE = env_int("TASKGEN_THUMBNAIL_SIZE", 240, minimum=32)
# Processes that read, hash and check episode files while the import writes the database (1: none).
IMPORT_WORKERS = env_int("TASKGEN_IMPORT_WORKERS", 2, minimum=1)

# Pipeline runs started from the browser may only read and write below this folder.
DATA_ROOT = env_path("TASKGEN_DATA_ROOT", VAR_DIR / "data")

# Celery: Redis in production and CI, an embedded filesystem broker by default so `make demo` needs no server.
_BROKER_SCHEMES = {"redis", "rediss", "amqp", "memory", "sqla+sqlite", "sqla+postgresql"}
# Redis's password (docker-compose: a secret file, REDIS_PASSWORD_FILE) goes into every redis:// URL that has none.
REDIS_PASSWORD = env_secret("REDIS_PASSWORD")
CELERY_BROKER_URL = redis_url_with_password(env_str("CELERY_BROKER_URL", "filesystem://"), REDIS_PASSWORD)
if CELERY_BROKER_URL != env_str("CELERY_BROKER_URL", "filesystem://"):
    # Celery prefers the environment's CELERY_BROKER_URL (no password) to this setting, but these two to both.
    CELERY_BROKER_READ_URL = CELERY_BROKER_WRITE_URL = CELERY_BROKER_URL
if CELERY_BROKER_URL == "filesystem://":
    _queue_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_queue_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # kombu keeps its exchange tables in ./control by default: inside the checkout, where git sees them.
        "control_folder": str(_queue_dir / "control"),
        "data_folder_in": str(_queue_dir / "queue"),
        "data_folder_out": str(_queue_dir / "queue"),
        "processed_folder": str(_queue_dir / "processed"),
        "store_processed": False,
        # kombu's default polls the folder once a second, and a worker then takes about one message a poll: a run's
        # no-op wake-up messages (one per judge slot) held the next run's work back by tens of seconds.
        "polling_interval": 0.1,
    }
elif CELERY_BROKER_URL.split("://", 1)[0] not in _BROKER_SCHEMES:
    raise ImproperlyConfigured(f"CELERY_BROKER_URL has an unsupported scheme: {CELERY_BROKER_URL.split('://', 1)[0]!r}")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# ── The pipeline engine (taskgen/engine/): leases, slices, the reconciler, and the Celery limits that agree ─────
# A worker leases a stage's units for ENGINE_LEASE_SECONDS and its heartbeat renews the lease every third of that
# while a unit is worked, however long the unit takes: a killed worker's units come back one lease after the kill
# (plus a reconciler's pass), not after the longest a unit may take. A worker works for at most ENGINE_SLICE_SECONDS
# per Celery task, then hands the rest to a new message. The reconciler (Celery beat, every
# ENGINE_RECONCILE_SECONDS; the CLI runs it too while it waits) re-queues units whose lease ran out, fails a unit
# after its stage's attempts, wakes runs that have work and no worker, and finishes runs with every unit settled.
ENGINE_LEASE_SECONDS = env_int("TASKGEN_ENGINE_LEASE_SECONDS", 20, minimum=3)
ENGINE_SLICE_SECONDS = env_int("TASKGEN_ENGINE_SLICE_SECONDS", 60, minimum=1)
ENGINE_RECONCILE_SECONDS = env_int("TASKGEN_ENGINE_RECONCILE_SECONDS", 10, minimum=1)
ENGINE_WAKE_AGAIN_SECONDS = env_int("TASKGEN_ENGINE_WAKE_AGAIN_SECONDS", 30, minimum=1)
ENGINE_WORKERS_PER_RUN = env_int("TASKGEN_ENGINE_WORKERS_PER_RUN", 8, minimum=1)
# The most one unit may take unless its stage says more (StageWork.unit_seconds): a judge call and its retries.
ENGINE_UNIT_SECONDS = env_int("TASKGEN_ENGINE_UNIT_SECONDS", 300, minimum=1)
# A task's time limits cover one slice plus one unit; the broker redelivers an unacknowledged message only after
# the hard limit has passed (so a slow task is never run twice at once by the broker's doing).
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", ENGINE_SLICE_SECONDS + ENGINE_UNIT_SECONDS,
                                      minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", CELERY_TASK_SOFT_TIME_LIMIT + 60, minimum=1)
if CELERY_BROKER_URL.startswith(("redis", "rediss")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 60}
CELERY_BEAT_SCHEDULE = {
    "engine-reconcile": {"task": "taskgen.engine.tasks.reconcile_task", "schedule": float(ENGINE_RECONCILE_SECONDS),
                         "options": {"expires": float(ENGINE_RECONCILE_SECONDS)}},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# ── end of the engine's block ──────────────────────────────────────────────────────────────────────────────────
# Validate's summary (PostgreSQL) re-sums the episodes written since its last refresh on this timer, and whenever the
# page is opened (taskgen/stages/validate/summary.py).
VALIDATE_REFRESH_SECONDS = env_int("TASKGEN_VALIDATE_REFRESH_SECONDS", 60, minimum=1)
CELERY_BEAT_SCHEDULE["validate-summary-refresh"] = {
    "task": "taskgen.stages.validate.tasks.validate_summary_refresh_task",
    "schedule": float(VALIDATE_REFRESH_SECONDS), "options": {"expires": float(VALIDATE_REFRESH_SECONDS)}}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# Separate queues so judge calls and browser episodes scale on their own workers: each engine stage names its queue
# (StageWork.queue); nothing else is routed.
CELERY_TASK_ROUTES: dict = {}
REDIS_URL = redis_url_with_password(
    env_str("REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""), REDIS_PASSWORD)

# Model providers. Without a key the app runs its offline providers and says so on every page.
GEMINI_API_KEY = env_secret("GEMINI_API_KEY")
GOOGLE_GEMINI_BASE_URL = env_str("GOOGLE_GEMINI_BASE_URL", "")
JUDGE_MODEL = env_str("TASKGEN_JUDGE_MODEL", "gemini-3.5-flash")
# Any chat-completions server (a self-hosted model on vLLM, Ollama, llama.cpp): its URL (".../v1"), the model it
# serves, whether that model takes images (else it gets text only), and a key if the server wants one.
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "")
OPENAI_API_KEY = env_secret("OPENAI_API_KEY")
OPENAI_MODEL = env_str("TASKGEN_OPENAI_MODEL", "Qwen/Qwen3.5-4B")
OPENAI_TAKES_IMAGES = env_bool("TASKGEN_OPENAI_IMAGES", True)
JUDGE_PROVIDER = env_str("TASKGEN_JUDGE_PROVIDER", "gemini" if GEMINI_API_KEY else "rules")
# (checked against the one provider list when Django starts: taskgen/startup.py)
JUDGE_RPM = env_int("TASKGEN_JUDGE_RPM", 600, minimum=1)
# The rate limit is counted per window of this many seconds (JUDGE_RPM scaled to it): a minute, as Gemini counts.
JUDGE_RATE_WINDOW_SECONDS = env_int("TASKGEN_JUDGE_RATE_WINDOW", 60, minimum=1)
JUDGE_PROMPT_FILE = env_str("TASKGEN_JUDGE_PROMPT_FILE", "")
# Judge calls: timeout per call, retries of transient errors (429, 5xx, timeouts) with exponential backoff + jitter
# (never sooner than the server's retry hint), and how screenshots are sent (see taskgen/stages/judge/images.py).
JUDGE_TIMEOUT_SECONDS = env_float("TASKGEN_JUDGE_TIMEOUT", 120.0)
JUDGE_MAX_ATTEMPTS = env_int("TASKGEN_JUDGE_MAX_ATTEMPTS", 5, minimum=1)
JUDGE_RETRY_BASE_SECONDS = env_float("TASKGEN_JUDGE_RETRY_BASE", 1.0)
JUDGE_RETRY_MAX_SECONDS = env_float("TASKGEN_JUDGE_RETRY_MAX", 30.0)
# `medium`: Gemini's own media_resolution sets an image's tokens (256 instead of 1,032 for a 1280x800 page), no
# image work here. Downscaled copies for the policies in JUDGE_IMAGE_COPIES are made when a screenshot is stored.
JUDGE_IMAGE_POLICY = env_str("TASKGEN_JUDGE_IMAGE_POLICY", "medium")  # checked at start (taskgen/startup.py)
# Copies cost a decode (about 25 ms a screenshot) at import. Unset (None), they are made only when the judge
# provider needs them (the provider table says so: taskgen/stages/judge/images.py, image_copies_wanted).
_COPIES = os.environ.get("TASKGEN_JUDGE_IMAGE_COPIES")
JUDGE_IMAGE_COPIES = None if _COPIES is None else tuple(n for n in _COPIES.replace(" ", "").split(",") if n)
if set(JUDGE_IMAGE_COPIES or ()) - {"small", "default"}:
    raise ImproperlyConfigured(f"TASKGEN_JUDGE_IMAGE_COPIES={JUDGE_IMAGE_COPIES!r}: list small and/or default")
# Judge calls in flight per judge worker process (threads of the `judge` queue's worker; the model call waits on
# the network, so one process keeps many in flight).
JUDGE_CONCURRENCY = env_int("TASKGEN_JUDGE_CONCURRENCY", 16, minimum=1)
# Threads of a judge worker process: the calls in flight plus a few that prepare the next episode (its evidence,
# the request, the SDK's encoding) and store the last one while the others wait on the model, so the process keeps
# JUDGE_CONCURRENCY calls in flight back to back (taskgen/stages/judge/service.py holds the in-flight limit).
JUDGE_THREADS = _judge_threads()
JUDGE_BATCH_POLL_SECONDS = env_int("TASKGEN_JUDGE_BATCH_POLL", 60, minimum=1)
# Screenshot bytes one Batch API job carries inline: Gemini takes inline jobs under 20 MB, and base64 adds a third
# (a run with more is sent as several jobs; an episode larger than this goes alone).
JUDGE_BATCH_JOB_BYTES = env_int("TASKGEN_JUDGE_BATCH_JOB_MB", 14, minimum=1) * 1024 * 1024
# USD per million tokens: (input, output). Override with TASKGEN_PRICE_<MODEL>="in,out".
MODEL_PRICES = {
    "gemini-3.5-flash": (0.30, 2.50),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-pro": (1.25, 10.00),
}
# The propose stage (its model is the provider's model setting): the prompt file, and how many tries a batch gets
# (a busy model is tried again later, never waited for in a worker slot).
PROPOSE_PROMPT_FILE = env_str("TASKGEN_PROPOSE_PROMPT_FILE", "")
PROPOSE_MAX_ATTEMPTS = env_int("TASKGEN_PROPOSE_MAX_ATTEMPTS", 5, minimum=1)
EXPORT_BUDGET = env_int("TASKGEN_EXPORT_BUDGET", 27644, minimum=1)
# Threads writing an export's files: file creation is the kernel's work, which runs in parallel on each core; more
# threads than cores only contend for Python's lock (on 2 cores, 4 threads were slower than 1).
EXPORT_WORKERS = env_int("TASKGEN_EXPORT_WORKERS", min(4, os.cpu_count() or 1), minimum=1)
# Episodes an export worker leases and writes together (one query, its writer threads): progress moves and a
# cancel takes effect a batch at a time.
EXPORT_BATCH = env_int("TASKGEN_EXPORT_BATCH", 100, minimum=1)
HARNESS_CHROMIUM = env_str("TASKGEN_CHROMIUM", "/usr/bin/chromium")
# Where the harness reaches the sandbox sites; empty: each harness process serves them itself on 127.0.0.1.
SANDBOX_BASE_URL = env_str("TASKGEN_SANDBOX_BASE_URL", "")
HARNESS_MAX_STEPS = env_int("TASKGEN_HARNESS_MAX_STEPS", 20, minimum=1)
# An episode still running after this many seconds of browser time is stopped and recorded as failed; a model
# agent's own time deciding is counted apart, against AGENT_MODEL_SECONDS (a slow model is not a stuck page).
HARNESS_EPISODE_SECONDS = env_int("TASKGEN_HARNESS_EPISODE_SECONDS", 120, minimum=5)
# Model agents (gemini, openai-compatible): what one step shows the model, capped so a long page does not blow the
# context; retries of a busy model (the judge's backoff rule); the prompt file (taskgen/prompts/agent_v1.txt).
AGENT_MODEL = env_str("TASKGEN_AGENT_MODEL", "")  # empty: the provider's default model
AGENT_PROMPT_FILE = env_str("TASKGEN_AGENT_PROMPT_FILE", "")
AGENT_MAX_ELEMENTS = env_int("TASKGEN_AGENT_MAX_ELEMENTS", 150, minimum=1)
AGENT_ELEMENT_CHARS = env_int("TASKGEN_AGENT_ELEMENT_CHARS", 80, minimum=10)
AGENT_TEXT_CHARS = env_int("TASKGEN_AGENT_TEXT_CHARS", 2500, minimum=0)
AGENT_HISTORY = env_int("TASKGEN_AGENT_HISTORY", 10, minimum=0)
AGENT_MAX_ATTEMPTS = env_int("TASKGEN_AGENT_MAX_ATTEMPTS", 4, minimum=1)
# The agent's own time (its model's answers, retries included) one episode may take before it is stopped.
AGENT_MODEL_SECONDS = env_int("TASKGEN_AGENT_MODEL_SECONDS", 600, minimum=5)
# The user's own harnesses, set by an admin in the environment only (never from a page): a JSON object
# {"name": "command with {tasks} {run_dir} {arm}"} or {"name": {"command": ..., "timeout_seconds": N}}.
EXTERNAL_HARNESS_SECONDS = env_int("TASKGEN_EXTERNAL_HARNESS_SECONDS", 3600, minimum=1)
# Read by taskgen.harness.external.external_harnesses(), checked when Django starts (taskgen/startup.py).
EXTERNAL_HARNESSES_JSON = env_str("TASKGEN_EXTERNAL_HARNESSES", "")
REVIEW_RESERVATION_MINUTES = env_int("TASKGEN_RESERVATION_MINUTES", 5, minimum=1)
SAMPLE_SEED = env_int("TASKGEN_SAMPLE_SEED", 20261202)
# the accuracy on known-truth checks below which a reviewer's labels are flagged in adjudication (issue 22)
REVIEWER_MIN_ACCURACY = env_float("TASKGEN_REVIEWER_MIN_ACCURACY", 0.8)
if not 0 < REVIEWER_MIN_ACCURACY <= 1:
    raise ImproperlyConfigured(f"TASKGEN_REVIEWER_MIN_ACCURACY={REVIEWER_MIN_ACCURACY} must be above 0 and at most 1")

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# ==== Production (issue 16): HTTPS, CSP, login throttling, structured logs. ====
# HTTPS settings all follow DJANGO_HTTPS, on by default when the app runs as in production (DEBUG off and the secret
# key given in the environment), so `manage.py check --deploy` is clean there; each can be set on its own.
# `make demo` and the tests (no secret key in the environment) serve plain HTTP on 127.0.0.1.
HTTPS = env_bool("DJANGO_HTTPS", not DEBUG and bool(env_str("DJANGO_SECRET_KEY") or env_str("DJANGO_SECRET_KEY_FILE")))
# Behind a TLS-terminating proxy, which sets X-Forwarded-Proto (and must strip the client's own).
# Its X-Forwarded-For also names the client (the login throttle counts per client, not per proxy).
BEHIND_PROXY = env_bool("DJANGO_BEHIND_PROXY", HTTPS)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", HTTPS)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", HTTPS)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# No inline script or style anywhere: scripts and styles are static files. django-csp sets the header on every
# answer that has none of its own (with DEBUG on, not on Django's 404 and 500 pages, whose styles are inline).
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": ["'self'"], "script-src": ["'self'"], "style-src": ["'self'"], "img-src": ["'self'", "data:"],
    "font-src": ["'self'"], "connect-src": ["'self'"], "object-src": ["'none'"], "base-uri": ["'self'"],
    "form-action": ["'self'"], "frame-ancestors": ["'none'"],
}}
MIDDLEWARE = ["taskgen.logs.RequestLogMiddleware", MIDDLEWARE[0], "csp.middleware.CSPMiddleware", *MIDDLEWARE[1:]]

# Static files come from STATIC_ROOT (collected at the image's build) or, where nothing was collected (tests, the
# harness's own server), straight from the app's static folders: sandbox pages and the app look the same everywhere.
WHITENOISE_USE_FINDERS = True

# Failed logins are counted in the database by django-axes (taskgen/login_throttle.py), so a login never waits on
# Redis. The cache (Redis when there is one) holds nothing a request cannot do without; its short timeouts keep an
# outage of Redis from holding a request up.
CACHE_URL = redis_url_with_password(env_str("TASKGEN_CACHE_URL", REDIS_URL), REDIS_PASSWORD)
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL,
                      "KEY_PREFIX": "taskgen",
                      "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}
          if CACHE_URL.startswith(("redis://", "rediss://")) else
          {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
LOGIN_FAILURE_LIMIT = env_int("TASKGEN_LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("TASKGEN_LOGIN_FAILURE_WINDOW", 900, minimum=1)
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # last, as axes asks: it turns a refused login into its page
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(seconds=LOGIN_FAILURE_WINDOW_SECONDS)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one alone: a name guessed from many addresses too
AXES_CLIENT_IP_CALLABLE = "taskgen.login_throttle.client_address"
AXES_USERNAME_CALLABLE = "taskgen.login_throttle.login_username"
AXES_LOCKOUT_CALLABLE = "taskgen.login_throttle.login_refused"
AXES_RESET_ON_SUCCESS = False  # the login view clears the username's failures only, never the address's
AXES_DISABLE_ACCESS_LOG = True  # the request log has every login; no table that grows with each one
AXES_VERBOSE = False

# One JSON line per record (TASKGEN_LOG_FORMAT=text for plain lines): one per request (taskgen.logs), one per Celery
# task; a 4xx is its request's line alone (django.request's own 4xx line is dropped), a 5xx keeps its traceback.
LOG_FORMAT = env_str("TASKGEN_LOG_FORMAT", "json")
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"TASKGEN_LOG_FORMAT={LOG_FORMAT!r} is not json or text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "taskgen.logs.JsonFormatter"},
                   "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"no_client_errors": {"()": "taskgen.logs.ClientErrorsLoggedElsewhere"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT,
                             "filters": ["no_client_errors"]}},
    "root": {"handlers": ["console"], "level": env_str("TASKGEN_LOG_LEVEL", "INFO")},
    # httpx (under the Gemini SDK) logs every request at INFO: one line per judge call drowns everything else.
    # Celery's own received/succeeded lines are replaced by one `task` line each (taskgen.logs).
    # httpx2 (the Gemini SDK's transport) logs every request at INFO: a line per judgment, CPU for nothing.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx": {"level": "WARNING"},
                "httpx2": {"level": "WARNING"}, "httpcore": {"level": "WARNING"},
                "celery.app.trace": {"level": "WARNING"},
                "celery.worker.strategy": {"level": "WARNING"},
                # django-axes says three things at INFO on every login; its failures and lockouts are WARNING.
                "axes": {"level": "WARNING"}},
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False  # workers log through LOGGING above, in the same format
# ==== end of Production ====
