"""Pipeline stages: plain functions over models and files that the engine's workers, the command line and the pages
all call. Each stage is a folder; its `work.py` registers the stage with the engine."""
from __future__ import annotations

import importlib
import pkgutil


def stage_packages() -> list[str]:
    """The stage folders (taskgen/stages/<stage>/), each a package."""
    return [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__) if info.ispkg]


def stages_register() -> None:
    """Register every stage with the engine (called once when Django starts): import each folder's `work.py`."""
    for package in stage_packages():
        if importlib.util.find_spec(f"{package}.work") is not None:
            importlib.import_module(f"{package}.work")
