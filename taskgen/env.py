"""One reader for settings from the environment: bad values fail loudly at start, secrets come from env or a _FILE."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """The variable's text, or the default when it is unset."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """A yes/no variable; anything but a clear yes or no is a configuration error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a yes/no value (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """A whole-number variable, at least `minimum` when given."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below its minimum of {minimum}")
    return value


def env_float(name: str, default: float) -> float:
    """A decimal-number variable."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from exc


def env_path(name: str, default: Path) -> Path:
    """A filesystem path, made absolute."""
    raw = os.environ.get(name)
    return Path(raw).expanduser().resolve() if raw else default


def env_secret(name: str) -> str:
    """A secret from NAME or from the file named by NAME_FILE; never stored in the database or written to a log."""
    direct = os.environ.get(name, "").strip()
    file_name = os.environ.get(f"{name}_FILE", "").strip()
    if direct and file_name:
        raise ImproperlyConfigured(f"set either {name} or {name}_FILE, not both")
    if not file_name:
        return direct
    try:
        return Path(file_name).read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc.strerror}") from exc


def redis_url_with_password(url: str, password: str) -> str:
    """A redis:// (or rediss://) URL with the password put in, unless it names one already; any other URL as it is.

    The password comes from a secret (REDIS_PASSWORD or REDIS_PASSWORD_FILE), so a URL in the environment or in
    .env never has to carry it."""
    parts = urlsplit(url)
    if not password or parts.scheme not in {"redis", "rediss"} or parts.password is not None:
        return url
    user, host = (parts.username or ""), parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))
