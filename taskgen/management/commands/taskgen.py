"""`python manage.py taskgen <stage> ...`: one command, a subcommand per pipeline stage.

Each subcommand is a module, a stage's `taskgen/stages/<stage>/command.py` or one of `taskgen/cli/`, that defines
HELP, add_arguments(parser) and run(options, stdout, stderr) -> exit code; a new stage adds its folder's command
module and nothing here changes.
"""
from __future__ import annotations

import contextlib
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


def _subcommand_name(module_name: str, module) -> str:
    return getattr(module, "NAME", module_name.split(".")[-1])


def _subcommands() -> dict[str, object]:
    found = {}
    for name in _module_names():
        module = importlib.import_module(name)
        found[_subcommand_name(name, module)] = module
    return found


def _subcommand(stage: str) -> dict[str, object]:
    """The one subcommand a command line names, imported alone when its module is where its name says (a stage's
    folder, with or without the trailing underscore of `import_`; a tool's module, dashes as underscores): the
    other subcommands' modules import their stages' services (the browser harness's, the export's), CPU at every
    start of a process that never runs them. Every subcommand when the name is found another way (`rows`) or not
    at all (argparse says which there are)."""
    tool = stage.replace("-", "_")
    if not tool.isidentifier() or tool.startswith("_"):
        return _subcommands()
    for name in (f"taskgen.stages.{tool}.command", f"taskgen.stages.{tool}_.command", f"taskgen.cli.{tool}"):
        with contextlib.suppress(ImportError):  # not there; a module that is there and fails fails again below
            module = importlib.import_module(name)
            if _subcommand_name(name, module) == stage:
                return {stage: module}
    return _subcommands()


# Every system check but the web's own, the URL conf's, the admin's and the templates': the URL conf imports every
# page, and the pages import what only they and a few stages use (the certificate's numpy: 12 MB, a tenth of
# `taskgen rows`'s peak memory); the admin's and the templates' make every template engine, which imports every
# template tag library (25 ms of each command's start, before a judge's first call; no pipeline command renders a
# template). `manage.py check`, migrate, runserver and the tests run them all.
WEB_ONLY = (Tags.urls, Tags.admin, Tags.templates)
CHECKED = [tag for name, tag in vars(Tags).items() if not name.startswith("_") and tag not in WEB_ONLY]


class Command(BaseCommand):
    requires_system_checks = CHECKED
    _stage = ""  # the subcommand the command line names (run_from_argv), when it names one

    @property
    def help(self) -> str:
        """The subcommands parsed (create_parser sets them first), or all of them (`manage.py help taskgen`)."""
        return "Taskgen pipeline stages: " + ", ".join(sorted(getattr(self, "_modules", None) or _subcommands()))

    def run_from_argv(self, argv: list[str]) -> None:
        if len(argv) > 2 and not argv[2].startswith("-"):
            self._stage = argv[2]
        super().run_from_argv(argv)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs) -> CommandParser:
        self._modules = _subcommand(self._stage) if self._stage else _subcommands()
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")
        for name, module in sorted(self._modules.items()):
            child = sub.add_parser(name, help=module.HELP, description=module.HELP)
            module.add_arguments(child)

    def handle(self, *args, **options) -> None:
        module = self._modules[options["stage"]]
        code = module.run(options, self.stdout, self.stderr)
        if code:
            self.stderr.flush()
            if options.get("traceback"):
                raise CommandError(f"{options['stage']} failed", returncode=code)
            sys.exit(code)
