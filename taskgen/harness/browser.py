"""One headless Chromium per worker process, launched on first use and again if it died."""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from django.conf import settings

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]

_local = threading.local()  # Playwright's sync API belongs to the thread that started it
# Playwright's sync API keeps an asyncio loop running in its thread, where Django refuses database calls; so the
# browser lives in its own thread and the harness's database work stays in the caller's.
_browser_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="browser")
T = TypeVar("T")


class HarnessError(RuntimeError):
    """The harness cannot run an episode (no browser, a refused URL)."""


def _launch():
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    executable = settings.HARNESS_CHROMIUM
    kwargs = {"executable_path": executable} if executable and Path(executable).exists() else {}
    try:
        browser = playwright.chromium.launch(headless=True, args=CHROMIUM_ARGS, **kwargs)
    except Exception as exc:
        playwright.stop()
        raise HarnessError(f"could not start Chromium ({executable or 'Playwright default'}): {exc}") from exc
    return playwright, browser


def browser_get():
    """This thread's browser, launching (or relaunching after a crash) as needed."""
    current = getattr(_local, "browser", None)
    if current is not None and current.is_connected():
        return current
    browser_close()
    _local.playwright, _local.browser = _launch()
    return _local.browser


def browser_context(viewport: dict):
    """This thread's browsing context, made once per browser: a new one per episode costs more than the episode's
    pages. Episodes stay apart because the harness clears the cookies (the only state the sites keep) and opens a
    new page (a fresh history) for each."""
    browser = browser_get()
    context = getattr(_local, "context", None)
    if context is None or context.browser is not browser:
        _local.context = browser.new_context(viewport=viewport, locale="en-US")
    return _local.context


def browser_close() -> None:
    _local.context = None
    for name in ("browser", "playwright"):
        thing = getattr(_local, name, None)
        setattr(_local, name, None)
        if thing is None:
            continue
        try:
            thing.close() if name == "browser" else thing.stop()
        except Exception:  # noqa: S110  a dead browser cannot be closed twice; nothing to recover
            pass


def in_browser_thread(fn: Callable[..., T], *args, **kwargs) -> T:
    """Run fn in this process's browser thread and return its result (its exception is raised here)."""
    return _browser_thread.submit(fn, *args, **kwargs).result()

