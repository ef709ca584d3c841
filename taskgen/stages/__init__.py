"""Pipeline stages: plain functions over models and files that the engine's workers, the command line and the pages
all call. Each stage is a folder; its `work.py` registers the stage with the engine when the engine first asks for
it."""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil


def stage_packages() -> list[str]:
    """The stage folders (taskgen/stages/<stage>/), each a package."""
    return [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__) if info.ispkg]


def stage_work_modules() -> dict[str, str]:
    """Each stage's name and its `work.py`, which registers it with the engine when imported: the folder's name, a
    trailing underscore dropped (`import_`, a Python keyword, is the `import` stage). Nothing is imported here."""
    return {package.rsplit(".", 1)[1].rstrip("_"): f"{package}.work" for package in stage_packages()
            if importlib.util.find_spec(f"{package}.work") is not None}
