# Taskgen Review. `make demo` runs the app on its embedded defaults; `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# The suite runs in three processes (pytest-xdist; tests/conftest.py keeps the files that start processes or a browser
# each on one of them, and tests/settings.py gives each process its own var folder, test database and Redis database);
# `make test PYTEST_ARGS=` runs it in one.
PYTEST_ARGS ?= -n 3 --dist loadgroup

.PHONY: install demo demo-data serve worker test lint chromium migrate clean bench lock

# pip's own output (and any warnings of this machine's pip configuration) goes to var/install.log, shown on failure.
$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.11 or set PYTHON=" >&2; exit 1; }
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	@mkdir -p var && echo "installing the app and its pinned dependencies into $(VENV) (pip's output: var/install.log)"
	@{ $(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet -e '.[test]'; } >var/install.log 2>&1 \
	  || { tail -n 25 var/install.log >&2; echo "install failed: the whole output is in var/install.log" >&2; exit 1; }
	@touch $@

# The app's own modules compiled (pip compiles the dependencies; an editable install leaves the app's own to each
# process, which compiles ~140 of them again at every start when PYTHONDONTWRITEBYTECODE is set, as on this machine
# and in the image: ~0.1 s of each command's start). Only changed files are compiled again.
install: $(VENV)/.installed
	@$(PY) -m compileall -q manage.py taskgen review sandbox

migrate: install
	$(PY) manage.py migrate --no-input

## chromium: Debian's Chromium for the harness and browser tests (Playwright cannot download its own here).
chromium:
	@if [ -x /usr/bin/chromium ]; then echo "chromium: $$(/usr/bin/chromium --version 2>/dev/null)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || { echo "could not install chromium with apt-get" >&2; exit 1; }; \
	else echo "chromium missing: run 'sudo apt-get install -y chromium' (browser tests will be skipped)" >&2; fi

demo-data: install
	@$(PY) manage.py migrate --no-input -v0
	@$(PY) manage.py taskgen demo-setup
	@$(PY) manage.py taskgen sandbox-sitemap 2>/dev/null
	@$(PY) manage.py taskgen demo-data
	@$(PY) manage.py taskgen demo-attempt
	@$(PY) manage.py taskgen demo-judge

## demo: set up, load demo data, start a Celery worker and the web server on http://$(HOST):$(PORT)/; the final
## banner says the login; Ctrl-C stops both within 10 s (their output goes to var/logs/)
demo: chromium demo-data
	@$(PY) manage.py collectstatic --no-input -v0
	@$(PY) manage.py taskgen demo-serve --host $(HOST) --port $(PORT)

## lint: ruff, and the layers (pyproject.toml [tool.importlinter]): an import that runs back up fails with its name
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo --no-cache

## test: install what the tests need and run them all (SQLite without services; PostgreSQL/Redis by URL, as in CI)
test: install chromium lint
	$(PY) manage.py makemigrations --check --dry-run >/dev/null || { echo "models changed without a migration" >&2; exit 1; }
	@set +e; $(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

## lock: requirements.lock, every package the app runs on, pinned, resolved from pyproject.toml in a clean venv (the
## Docker image installs exactly this file; run it after changing a dependency and commit the result)
lock:
	@rm -rf var/lock-venv && $(PYTHON) -m venv var/lock-venv
	@var/lock-venv/bin/pip install --quiet --upgrade pip && var/lock-venv/bin/pip install --quiet .
	@{ echo "# Made by 'make lock' from pyproject.toml: the image installs exactly these. Do not edit by hand."; \
	  var/lock-venv/bin/pip freeze --exclude taskgen-review; } > requirements.lock
	@rm -rf var/lock-venv build && echo "requirements.lock: $$(grep -vc '^#' requirements.lock) packages"

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf var/broker var/staticfiles .pytest_cache
