#!/usr/bin/env python
"""Django's command-line utility for Taskgen Review."""
import atexit
import gc
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
    from django.core.management import execute_from_command_line

    if sys.argv[1:2] == ["taskgen"]:  # the pipeline's commands, each a process of its own: its start uncollected
        import django

        from taskgen.collector import start_uncollected

        with start_uncollected():
            django.setup()  # execute_from_command_line's own setup then finds the apps ready

    # A command's process ends without a last look for garbage among every object it made: Python's exit collects
    # several times over all of them (Django's, the SDKs'), which took `taskgen judge` 0.3-1.3 s after its last
    # call. Objects still alive then are freed as the modules go, as before; only cycles are left to the OS.
    atexit.register(gc.freeze)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
