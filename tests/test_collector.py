"""A process's start without garbage collections (taskgen/collector.py): the collector is off inside, back as it was
after, and what the start made is frozen out of later collections."""
from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from taskgen.collector import start_uncollected

ROOT = Path(__file__).resolve().parent.parent


def test_no_collection_inside_and_the_collector_as_it_was_after():
    gc.unfreeze()
    try:
        with start_uncollected():
            inside = gc.isenabled()
            made = [[n] for n in range(1000)]  # objects the collector tracks
        assert not inside and gc.isenabled()
        assert gc.get_freeze_count() >= len(made)
        gc.disable()
        with start_uncollected():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_taskgen_command_starts_uncollected_and_works_collected():
    """`manage.py taskgen ...`: Django's setup inside start_uncollected, the command itself with the collector on."""
    probe = ("import gc, runpy, sys\n"
             "import django\n"
             "seen, real = [], django.setup\n"
             "def setup(*args, **kwargs):\n"
             "    seen.append(gc.isenabled())\n"
             "    real(*args, **kwargs)\n"
             "django.setup = setup\n"
             "import taskgen.management.commands.taskgen as command\n"
             "def handle(self, *args, **options):\n"
             "    print('setup collected', seen[0], 'command collected', gc.isenabled())\n"
             "command.Command.handle = handle\n"
             "sys.argv = ['manage.py', 'taskgen', 'resume', '1']\n"
             "runpy.run_path('manage.py', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "setup collected False command collected True" in done.stdout, done.stdout + done.stderr
