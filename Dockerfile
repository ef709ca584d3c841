# The one image every app service runs (web, worker-judge, worker-browser, worker-default, beat, migrate).
# Debian's Chromium and fonts for the browser harness, the app's pinned dependencies from requirements.lock
# (`make lock`), static files collected at build, and a non-root user. See README "Production".
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=taskgen.settings \
    TASKGEN_CHROMIUM=/usr/bin/chromium \
    TASKGEN_VAR_DIR=/var/lib/taskgen \
    TASKGEN_MEDIA_ROOT=/var/lib/taskgen/media \
    TASKGEN_DATA_ROOT=/var/lib/taskgen/data \
    TASKGEN_STATIC_ROOT=/app/staticfiles

# Chromium from Debian (Playwright cannot download its own browser offline), with fonts so pages render legibly.
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation fonts-dejavu-core fonts-noto-core \
      fonts-noto-color-emoji tini \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 taskgen \
 && useradd --system --uid 10001 --gid taskgen --home-dir /home/taskgen --create-home taskgen

WORKDIR /app
COPY requirements.lock ./
RUN pip install --no-deps -r requirements.lock && pip check

COPY manage.py pyproject.toml gunicorn.conf.py ./
COPY taskgen ./taskgen
COPY review ./review
COPY sandbox ./sandbox
COPY templates ./templates
COPY static ./static

# The app's own modules compiled once here: PYTHONDONTWRITEBYTECODE keeps the running services from writing them, and
# without them every process (each `taskgen` command, each worker) compiles ~140 modules again at its start (~0.1 s).
RUN python -m compileall -q manage.py taskgen review sandbox

# A throwaway key for the build only: collectstatic reads settings, which need one; the services get theirs as a secret.
RUN DJANGO_SECRET_KEY=collectstatic-at-build-only TASKGEN_VAR_DIR=/tmp/build-var \
      python manage.py collectstatic --no-input -v0 \
 && rm -rf /tmp/build-var \
 && mkdir -p /var/lib/taskgen/media /var/lib/taskgen/data /var/lib/taskgen/beat \
 && chown -R taskgen:taskgen /var/lib/taskgen

USER taskgen
EXPOSE 8000
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["gunicorn", "-c", "gunicorn.conf.py", "taskgen.wsgi"]
