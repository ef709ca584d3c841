"""The app's declared dependencies (pyproject.toml) are the libraries its code imports: nothing imported is left to
arrive by chance through another package, and what nothing needs is not installed into every image."""
from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ("taskgen", "review", "sandbox")


def _declared(group: str | None = None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return {spec.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower().replace("_", "-")
            for spec in specs}


def _imported_top_names() -> dict[str, str]:
    """Each top-level module the app's code imports (not its own, not the standard library) -> a file importing it."""
    found: dict[str, str] = {}
    for package in APP:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                         else [])
                for name in names:
                    top = name.split(".")[0]
                    if top not in APP and top not in sys.stdlib_module_names:
                        found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_library_the_app_imports_is_a_declared_dependency():
    distributions, declared = packages_distributions(), _declared()
    undeclared = {top: where for top, where in _imported_top_names().items()
                  if not {d.lower().replace("_", "-") for d in distributions.get(top, [top])} & declared}
    assert not undeclared, f"imported but not in pyproject.toml's dependencies: {undeclared}"


def test_no_dependency_is_declared_that_nothing_imports_or_runs():
    # Named in settings or run as a command rather than imported: the database driver and its pool (DATABASES'
    # engine and OPTIONS), the web server, and the static files and CSP middlewares (MIDDLEWARE).
    used_by_name = {"psycopg", "psycopg-pool", "gunicorn", "whitenoise", "django-csp"}
    distributions = packages_distributions()
    imported = {d.lower().replace("_", "-") for top in _imported_top_names() for d in distributions.get(top, [top])}
    unused = _declared() - imported - used_by_name
    assert not unused, f"declared in pyproject.toml but imported by no app module: {sorted(unused)}"
