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


def _imported_by(*argv: str) -> set[str]:
    """The app's modules a `manage.py taskgen ...` process imported (it prints them at exit)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(manage.__file__).resolve().parent
    show = ("import atexit, sys; atexit.register(lambda: print(*sorted(m for m in sys.modules "
            "if m.startswith('taskgen.'))))")
    code = f"{show}; sys.argv = {['manage.py', 'taskgen', *argv]!r}; import manage; manage.main()"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=os.environ, capture_output=True, text=True,
                          timeout=120)
    return set(done.stdout.split())


def test_a_command_line_imports_only_the_subcommand_it_names():
    """`taskgen judge --help` imports the judge's command module, not the others' (the attempt's imports the browser
    harness); a subcommand whose module is not where its name says (`rows`: the export's) finds it among all."""
    judge = _imported_by("judge", "--help")
    assert "taskgen.stages.judge.command" in judge
    assert not {"taskgen.stages.attempt.command", "taskgen.stages.attempt.service", "taskgen.cli.resume"} & judge
    assert "taskgen.stages.export.command" in _imported_by("rows", "--help")
    assert "taskgen.stages.import_.command" in _imported_by("import", "--help")
    assert "taskgen.cli.demo_judge" in _imported_by("demo-judge", "--help")
