"""docker-compose.yml, the Dockerfile and .env.example are honest: Docker is not installed here, so this reads them and
checks that every command, healthcheck, variable, secret and volume refers to something that exists."""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.core.management import get_commands
from django.urls import resolve

from taskgen.engine.stage_table import stages_all
from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = [name for name, s in SERVICES.items() if s.get("build") == "."]
ENV_EXAMPLE = (ROOT / ".env.example").read_text()
DOCKERFILE = (ROOT / "Dockerfile").read_text()
INTERPOLATED = re.compile(r"\$\{([A-Z0-9_]+)(?::?[-?][^}]*)?\}")


def listed_in_env_example(name: str) -> bool:
    return re.search(rf"^(# )?{re.escape(name)}=", ENV_EXAMPLE, re.M) is not None


def _queues() -> set[str]:
    """Every queue the app sends work to: Celery's routes and the engine's stages' queues."""
    return ({settings.CELERY_TASK_DEFAULT_QUEUE} | {r["queue"] for r in settings.CELERY_TASK_ROUTES.values()}
            | {work.queue for work in stages_all().values()})


def _option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_every_stage_has_its_service():
    assert {"web", "worker-judge", "worker-browser", "worker-default", "beat", "redis", "postgres", "migrate",
            "flower"} <= set(SERVICES)
    assert set(APP_SERVICES) == {"web", "worker-judge", "worker-browser", "worker-default", "beat", "migrate"}
    assert SERVICES["flower"]["profiles"] == ["flower"]


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_commands_name_programs_and_modules_that_exist(name):
    command = SERVICES[name]["command"]
    program = command[0]
    assert (Path(sys.executable).parent / program).exists() or program == "python", program
    if program == "python":
        assert command[1] == "manage.py" and command[2] in get_commands(), command
    elif program == "gunicorn":
        assert (ROOT / _option(command, "-c")).is_file() and importlib.util.find_spec(command[-1]), command
    else:
        assert program == "celery" and _option(command, "-A") == "taskgen", command
        assert command[3] in {"worker", "beat"}, command


def test_each_worker_takes_its_own_queue_with_a_pool_that_suits_it():
    pools = {}
    for name in ("worker-judge", "worker-browser", "worker-default"):
        command = SERVICES[name]["command"]
        assert set(_option(command, "-Q").split(",")) <= _queues(), command
        pools[_option(command, "-Q")] = _option(command, "-P")
        concurrency = INTERPOLATED.fullmatch(_option(command, "--concurrency"))
        assert concurrency and listed_in_env_example(concurrency.group(1)), command  # from the environment
    assert pools == {"judge": "threads", "browser": "prefork", "default": "prefork"}
    assert _queues() == set(pools)  # every queue the app routes to has a worker


def test_healthchecks_and_depends_on_refer_to_what_exists():
    for name, service in SERVICES.items():
        if name not in {"migrate", "flower"}:
            assert "healthcheck" in service, f"{name} has no healthcheck"
        for other, rule in (service.get("depends_on") or {}).items():
            assert other in SERVICES and rule["condition"] in {
                "service_healthy", "service_completed_successfully", "service_started"}, (name, other)
            wanted = "service_completed_successfully" if other == "migrate" else "service_healthy"
            assert rule["condition"] == wanted, (name, other)
    web_check = SERVICES["web"]["healthcheck"]["test"]
    assert web_check[:4] == ["CMD", "python", "-m", "taskgen.healthcheck"]
    assert importlib.util.find_spec("taskgen.healthcheck")
    assert resolve(web_check[4].split(":8000", 1)[1]).url_name == "login"  # a real page, not a static file
    for name in ("worker-judge", "worker-browser", "worker-default"):
        check = shlex.split(SERVICES[name]["healthcheck"]["test"][1])
        node = _option(SERVICES[name]["command"], "-n").split("@")[0]
        assert check[:4] == ["celery", "-A", "taskgen", "inspect"] and _option(check, "-d") == f"{node}@$$HOSTNAME"
    assert "/var/lib/taskgen/beat" in SERVICES["beat"]["healthcheck"]["test"][1]
    assert _option(SERVICES["beat"]["command"], "-s").startswith("/var/lib/taskgen/beat/")
    assert "mkdir -p /var/lib/taskgen/media /var/lib/taskgen/data /var/lib/taskgen/beat" in DOCKERFILE


def test_secrets_and_volumes_are_declared_and_attached():
    declared_secrets, declared_volumes = set(COMPOSE["secrets"]), set(COMPOSE["volumes"])
    for name, service in SERVICES.items():
        attached = set(service.get("secrets", []))
        assert attached <= declared_secrets, name
        for variable, value in (service.get("environment") or {}).items():
            if str(value).startswith("/run/secrets/"):
                assert value.removeprefix("/run/secrets/") in attached, (name, variable)
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            assert source in declared_volumes, (name, mount)
    app_env = SERVICES["web"]["environment"]
    assert app_env["GEMINI_API_KEY_FILE"] == "/run/secrets/gemini_api_key"  # the key reaches every app service
    assert app_env["DJANGO_SECRET_KEY_FILE"] == "/run/secrets/django_secret_key"
    for file in COMPOSE["secrets"].values():
        assert file["file"].startswith("./secrets/")
    assert "/secrets/" in (ROOT / ".gitignore").read_text().splitlines() and ".env" in (ROOT / ".gitignore").read_text()
    mounts = {m.split(":")[1] for m in SERVICES["web"]["volumes"]}
    assert {"/var/lib/taskgen/media", "/var/lib/taskgen/data"} == mounts
    assert "TASKGEN_MEDIA_ROOT=/var/lib/taskgen/media" in DOCKERFILE
    assert "TASKGEN_DATA_ROOT=/var/lib/taskgen/data" in DOCKERFILE
    assert SERVICES["postgres"]["volumes"] == ["pgdata:/var/lib/postgresql/data"]
    assert SERVICES["redis"]["volumes"] == ["redisdata:/data"]


def test_redis_keeps_queued_work_across_a_restart():
    command = SERVICES["redis"]["command"]
    assert command[0] == "redis-server" and _option(command, "--appendonly") == "yes"


def _duration_seconds(text: str) -> float:
    """Compose's duration ("200s", "1m30s") in seconds."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", str(text))
    assert parts and any(parts.groups()), text
    hours, minutes, seconds = (int(g or 0) for g in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def test_every_long_running_service_gets_time_to_finish_the_work_in_hand():
    """Docker's default of 10 s killed a worker in the middle of its 60 s slice on every redeploy."""
    grace = {name: _duration_seconds(service["stop_grace_period"])
             for name, service in SERVICES.items() if "stop_grace_period" in service}
    assert set(SERVICES) - {"migrate", "flower"} <= set(grace), set(SERVICES) - set(grace)
    slice_ = settings.ENGINE_SLICE_SECONDS
    assert grace["worker-judge"] >= slice_ + settings.JUDGE_TIMEOUT_SECONDS
    assert grace["worker-browser"] >= slice_ + settings.HARNESS_EPISODE_SECONDS
    assert grace["worker-default"] >= slice_ + 30
    gunicorn = (ROOT / "gunicorn.conf.py").read_text()
    assert grace["web"] > int(re.search(r"^graceful_timeout = (\d+)", gunicorn, re.M).group(1))
    assert all(seconds > 10 for seconds in grace.values())
    for name in ("worker-judge", "worker-browser", "worker-default", "beat"):
        assert SERVICES[name]["command"][0] == "celery"  # exec form: tini hands SIGTERM to Celery (a warm shutdown)


def test_every_service_rotates_its_log():
    for name, service in SERVICES.items():
        logging = service.get("logging") or {}
        assert logging.get("driver") == "json-file", name
        assert {"max-size", "max-file"} <= set(logging.get("options") or {}), name


def test_redis_asks_for_a_password_that_every_client_is_given():
    redis = SERVICES["redis"]
    assert "redis_password" in redis["secrets"] and "redis_password" in COMPOSE["secrets"]
    assert "--requirepass" in redis["entrypoint"][2] and "/run/secrets/redis_password" in redis["entrypoint"][2]
    assert "REDISCLI_AUTH" in redis["healthcheck"]["test"][1]
    for name in APP_SERVICES:
        assert SERVICES[name]["environment"]["REDIS_PASSWORD_FILE"] == "/run/secrets/redis_password", name
        assert "redis_password" in SERVICES[name]["secrets"], name
    assert "/run/secrets/redis_password" in SERVICES["flower"]["command"][2]
    assert "redis_password" in SERVICES["flower"]["secrets"]


def _in_a_shell(compose_shell: str, tmp_path: Path, *args: str, env: dict | None = None):
    """Run a service's `sh -c` text as its container would (compose's $$ is $), with the secret at a file of ours
    and programs of ours first on the PATH."""
    script = compose_shell.replace("$$", "$").replace("/run/secrets/redis_password", str(tmp_path / "redis_password"))
    return subprocess.run(["sh", "-c", script, *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", **(env or {})})


def _program(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / "bin").mkdir(exist_ok=True)
    path = tmp_path / "bin" / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
def test_the_redis_service_refuses_clients_without_its_password(tmp_path):
    """The service's entrypoint started for real (the image's entrypoint stood in for by one that starts this
    machine's redis-server on a port of ours), its healthcheck run against it, and the app's settings reading the
    same secret reach it: broker and cache."""
    import redis

    (tmp_path / "redis_password").write_text("s3cret/+@x\n")
    port = free_port()
    _program(tmp_path, "docker-entrypoint.sh",
             f'shift; exec redis-server "$@" --port {port} --bind 127.0.0.1 --save "" --dir {tmp_path}')
    script = SERVICES["redis"]["entrypoint"]
    server = subprocess.Popen(["sh", "-c", script[2].replace("$$", "$").replace(
        "/run/secrets/redis_password", str(tmp_path / "redis_password")), script[3], *SERVICES["redis"]["command"]],
        env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}, stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                redis.Redis(port=port, password="s3cret/+@x").ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()
        _program(tmp_path, "redis-cli", f'exec /usr/bin/redis-cli -p {port} "$@"')
        assert _in_a_shell(SERVICES["redis"]["healthcheck"]["test"][1], tmp_path).returncode == 0
        (tmp_path / "redis_password").write_text("wrong")
        assert _in_a_shell(SERVICES["redis"]["healthcheck"]["test"][1], tmp_path).returncode != 0
        (tmp_path / "redis_password").write_text("s3cret/+@x\n")
        app = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()\n"
             "from taskgen.celery import app\nfrom django.core.cache import cache\n"
             "app.connection_for_write().ensure_connection(max_retries=1)\n"
             "cache.set('compose-test', 'reached'); print(cache.get('compose-test'))"],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "taskgen.settings",
                 "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
                 "REDIS_PASSWORD_FILE": str(tmp_path / "redis_password")})
        assert app.returncode == 0 and app.stdout.strip() == "reached", app.stderr[-2000:]
    finally:
        server.kill()
        server.wait(10)


def test_flower_refuses_to_start_without_a_login_and_reaches_redis_with_its_password(tmp_path):
    (tmp_path / "redis_password").write_text("s3cret\n")
    _program(tmp_path, "celery", 'printf "%s\\n" "$@"')
    command = SERVICES["flower"]["command"]
    assert command[:2] == ["sh", "-c"]
    refused = _in_a_shell(command[2], tmp_path)
    assert refused.returncode != 0 and "FLOWER_BASIC_AUTH" in refused.stderr and not refused.stdout
    started = _in_a_shell(command[2], tmp_path, env={"FLOWER_BASIC_AUTH": "admin:pass"})
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["--broker=redis://:s3cret@redis:6379/0", "flower", "--port=5555"]


def test_app_environment_names_variables_the_settings_read_and_interpolations_are_listed():
    read = settings_variables()
    for name in APP_SERVICES:
        for variable in SERVICES[name].get("environment") or {}:
            assert variable in read, f"{name} sets {variable}, which the app never reads"
    for variable in set(INTERPOLATED.findall((ROOT / "docker-compose.yml").read_text())):
        assert listed_in_env_example(variable), f"docker-compose.yml uses ${{{variable}}}: list it in .env.example"


def settings_variables() -> set[str]:
    """Every environment variable taskgen/settings.py reads (a secret's NAME_FILE too)."""
    source = (ROOT / "taskgen" / "settings.py").read_text()
    names = set(re.findall(r'env_(?:str|bool|int|float|path|secret)\(\s*"([A-Z0-9_]+)"', source))
    names |= {f"{n}_FILE" for n in re.findall(r'env_secret\(\s*"([A-Z0-9_]+)"', source)}
    return names


def test_every_variable_the_settings_read_is_in_env_example():
    missing = sorted(n for n in settings_variables() if not listed_in_env_example(n))
    assert not missing, f"taskgen/settings.py reads variables .env.example does not list: {', '.join(missing)}"
    gunicorn = set(re.findall(r'os\.environ\.get\("([A-Z0-9_]+)"', (ROOT / "gunicorn.conf.py").read_text()))
    assert all(listed_in_env_example(n) for n in gunicorn), gunicorn


def test_the_image_installs_chromium_the_locked_dependencies_and_runs_as_a_user():
    assert re.search(r"apt-get install .*chromium", DOCKERFILE) and "fonts-" in DOCKERFILE
    assert "pip install --no-deps -r requirements.lock" in DOCKERFILE and "collectstatic" in DOCKERFILE
    user = re.findall(r"^USER (\S+)", DOCKERFILE, re.M)
    assert user and user[-1] not in {"root", "0"}
    for copied in re.findall(r"^COPY (.+) \S+$", DOCKERFILE, re.M):
        for path in copied.split():
            assert (ROOT / path).exists(), f"the Dockerfile copies {path}, which does not exist"


def test_the_lock_file_pins_every_dependency_at_the_version_pyproject_names():
    locked = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            locked[re.sub(r"[-_.]+", "-", name).lower()] = version
    for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        name, version = re.sub(r"\[.*\]", "", requirement).split("==")
        assert locked.get(re.sub(r"[-_.]+", "-", name).lower()) == version, requirement
