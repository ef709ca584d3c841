"""`python manage.py taskgen <stage> ...`: one command, a subcommand per pipeline stage.

Each subcommand is a module, a stage's `taskgen/stages/<stage>/command.py` or one of `taskgen/cli/`, that defines
HELP, add_arguments(parser) and run(options, stdout, stderr) -> exit code; a new stage adds its folder's command
module and nothing here changes.
"""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys

from django.core.checks import Tags
from django.core.management.base import BaseCommand, CommandError, CommandParser

import taskgen.cli
import taskgen.stages


def _module_names() -> list[str]:
    stages = [f"taskgen.stages.{info.name}.command" for info in pkgutil.iter_modules(taskgen.stages.__path__)
              if info.ispkg and importlib.util.find_spec(f"taskgen.stages.{info.name}.command")]
    tools = [f"taskgen.cli.{info.name}" for info in pkgutil.iter_modules(taskgen.cli.__path__)
             if not info.name.startswith("_")]
    return stages + tools


def _subcommands() -> dict[str, object]:
    found = {}
    for name in _module_names():
        module = importlib.import_module(name)
        found[getattr(module, "NAME", name.split(".")[-1])] = module
    return found


# Every system check but the URL conf's: that one imports every page, and the pages import what only they and a few
# stages use (the certificate's numpy: 12 MB, a tenth of `taskgen rows`'s peak memory); the pages' tests load it.
CHECKED = [tag for name, tag in vars(Tags).items() if not name.startswith("_") and tag != Tags.urls]


class Command(BaseCommand):
    help = "Taskgen pipeline stages: " + ", ".join(sorted(_subcommands()))
    requires_system_checks = CHECKED

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
