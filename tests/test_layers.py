"""The layers hold (pyproject.toml [tool.importlinter], run by `make lint`), and the check is one that can fail: the
same contracts over a copy of the code with one upward import planted report it by name."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(shutil.which("lint-imports") or ROOT / ".venv" / "bin" / "lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-logo", "--no-cache", "--config", str(tree / "pyproject.toml")], cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=120)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "house"
    for package in ("taskgen", "review", "sandbox"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__", "*.html"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_code_keeps_its_layers(tmp_path):
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_fails_the_check_and_is_named(tmp_path):
    tree = _copy(tmp_path)
    planted = tree / "taskgen" / "models" / "labels.py"
    planted.write_text(planted.read_text() + "\nfrom review.queues import queue_filter  # noqa: E402\n")
    sandbox = tree / "sandbox" / "pages.py"
    sandbox.write_text(sandbox.read_text() + "\nimport taskgen.stages.export.select  # noqa: E402\n")
    done = _lint(tree)
    assert done.returncode != 0
    assert "taskgen.models.labels -> review.queues" in done.stdout
    assert "sandbox.pages -> taskgen.stages.export.select" in done.stdout
