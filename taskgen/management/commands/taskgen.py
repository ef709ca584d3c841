"""`python manage.py taskgen <stage> ...`: one command, a subcommand per pipeline stage.

Each subcommand is a module in `taskgen/cli/` that defines HELP, add_arguments(parser) and run(options, stdout,
stderr) -> exit code; new stages add a module and nothing here changes.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

import taskgen.cli


def _subcommands() -> dict[str, object]:
    found = {}
    for info in pkgutil.iter_modules(taskgen.cli.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"taskgen.cli.{info.name}")
        found[getattr(module, "NAME", info.name)] = module
    return found


class Command(BaseCommand):
    help = "Taskgen pipeline stages: " + ", ".join(sorted(_subcommands()))

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")
        for name, module in sorted(_subcommands().items()):
            child = sub.add_parser(name, help=module.HELP, description=module.HELP)
            module.add_arguments(child)

    def handle(self, *args, **options) -> None:
        module = _subcommands()[options["stage"]]
        code = module.run(options, self.stdout, self.stderr)
        if code:
            self.stderr.flush()
            if options.get("traceback"):
                raise CommandError(f"{options['stage']} failed", returncode=code)
            sys.exit(code)
