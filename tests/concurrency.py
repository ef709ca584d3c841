"""Calls released at one moment, for tests of writes under concurrency: each on a thread of its own (so on its own
database connection, closed when it ends), all held at a barrier until every thread is ready."""
from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def together(calls: list[Callable[[], object]], *, timeout: float = 60) -> tuple[list[object], list[BaseException]]:
    """Run each call on its own thread, released together: what they returned, in the order they finished, and
    what they raised. A thread still running after `timeout` seconds is reported as an error, not waited for."""
    barrier, results, errors = threading.Barrier(len(calls)), [], []

    def run(call: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=timeout)
            results.append(call())
        except BaseException as exc:  # noqa: BLE001 - the test reports every thread's failure
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    errors += [TimeoutError(f"{thread.name} still running after {timeout} s") for thread in threads
               if thread.is_alive()]
    return results, errors
