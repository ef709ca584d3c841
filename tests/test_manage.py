"""manage.py, the process every `python manage.py ...` command runs in."""
from __future__ import annotations

import gc

import manage


def test_a_command_process_leaves_its_objects_to_the_os_at_exit(monkeypatch):
    """Python's exit would look for garbage among every object the command made (Django's, the SDKs'), several
    times over: the objects alive at exit are frozen instead, out of the collector's sight."""
    registered, ran = [], []
    monkeypatch.setattr(manage.atexit, "register", registered.append)
    monkeypatch.setattr("django.core.management.execute_from_command_line", ran.append)
    manage.main()
    assert ran and gc.freeze in registered
