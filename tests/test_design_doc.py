"""docs/DESIGN.md names the files and functions of this tree, and each must exist: a design that can drift from the code
unnoticed is one that will.

What it checks, in DESIGN.md's code spans: a path from one of the repository's own folders or files exists
(`taskgen/names.py`, `review/views/`); a citation `path.py: name, other` defines each name in that file (a function,
a class, or a name assigned there; `Class.attr` both); a dotted module (`taskgen.stages.begin`) exists; any other name
in the app's words (`export_select`, `RetryLater`) occurs in the app's code. Its layers table is pyproject.toml's
`layers` contract row by row, it names every import contract, and every stage on the engine has its row (with its
queue) and its section. README.md's pointers to a section of DESIGN.md ("Pages, validate ...") name one of its
headings.
"""
from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "DESIGN.md"
NOT_THE_TREE = {".git", ".venv", "var", "media", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache"}
APP_CODE = ("taskgen", "review", "sandbox")
# Names the doc uses from libraries the app builds on, not the app's own code.
LIBRARY_NAMES = {"AccessAttempt"}

SPAN = re.compile(r"`([^`]+)`")
CITATION = re.compile(r"^(?P<path>[\w.\-/]+)(?::\s*(?P<names>[\w., ()]+))?$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
SECTION_POINTER = re.compile(r"DESIGN\.md,\s*\"([^\"]+)\"")
CALL = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\(.*\)(?: -> .*)?$")  # `do_batch(run, params, keys) -> ...`


def design_spans() -> list[str]:
    """Every code span of DESIGN.md, its line breaks read as spaces."""
    return [" ".join(span.split()) for span in SPAN.findall(DESIGN.read_text(encoding="utf-8"))]


@cache
def top_level() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if p.name not in NOT_THE_TREE)


def is_tree_path(path: str) -> bool:
    """A path of this repository: it starts at one of its top-level folders or files."""
    first = path.split("/", 1)[0]
    return first in top_level() and ("/" in path or "." in path or (ROOT / first).is_file())


def defines(source: str, name: str) -> bool:
    """The module's text defines `name`: a def or class of that name, or the name assigned (alone or in a tuple) or
    annotated."""
    defined = rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b"
    assigned = rf"^\s*(?:\w+\s*,\s*)*{name}\s*(?::|=[^=]|,[\w\s,]*=[^=])"
    return bool(re.search(f"{defined}|{assigned}", source, re.M))


def citation_problems(path: str, names: str | None) -> list[str]:
    """What is wrong with one `path: names` citation ([] when the path exists and defines every name)."""
    target = ROOT / path
    if not target.exists():
        return [f"{path}: no such file or folder"]
    if not names:
        return []
    source = target.read_text(encoding="utf-8")
    wanted = [name.strip().removesuffix("()") for name in names.split(",") if name.strip()]
    return [f"{path}: {name} is not defined there" for name in wanted
            if not all(defines(source, part) for part in name.split("."))]


@cache
def app_source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for package in APP_CODE for p in (ROOT / package).rglob("*.py"))


def module_exists(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def name_problem(name: str) -> str | None:
    """A bare name in the app's words that the app's code does not hold; None when it does, or it is not one."""
    call = CALL.match(name)
    name = call["name"] if call else name
    if not IDENTIFIER.match(name) or name in LIBRARY_NAMES:
        return None
    first = name.split(".", 1)[0]
    if first in APP_CODE and "." in name and not name.endswith(".py"):
        return None if module_exists(name) else f"{name}: no such module"
    if "_" not in name and not re.search(r"[a-z][A-Z]", name):
        return None  # a plain word (`report`, `default`), not a name of the code
    last = name.rsplit(".", 1)[-1]
    return None if re.search(rf"\b{re.escape(last)}\b", app_source()) else f"{name}: not in the app's code"


def span_problems(span: str) -> list[str]:
    found = CITATION.match(span)
    if found and is_tree_path(found["path"]) and not any(c in span for c in "<>{}*"):
        return citation_problems(found["path"], found["names"])
    problem = name_problem(span)
    return [problem] if problem else []


def import_contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def module_path(dotted: str) -> str:
    """A module as the doc cites it: `taskgen/apps.py`, or a package's folder `taskgen/engine/`."""
    base = "/".join(dotted.split("."))
    return f"{base}.py" if (ROOT / f"{base}.py").is_file() else f"{base}/"


def design_layer_rows() -> list[set[str]]:
    """The paths each row of the layers table names in its packages column, top to bottom."""
    return [set(SPAN.findall(row[1])) for row in table_rows("## The layers", "| layer |")]


def table_rows(after: str, header: str) -> list[list[str]]:
    """The cells of a table of DESIGN.md: the first after the heading `after` whose header row starts `header`."""
    lines = DESIGN.read_text(encoding="utf-8").split(after, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in lines[start:end]]


def test_every_path_and_name_the_design_cites_exists():
    problems = [problem for span in design_spans() for problem in span_problems(span)]
    assert not problems, "docs/DESIGN.md cites what the tree does not hold:\n" + "\n".join(problems)


def test_the_design_cites_the_homes_of_its_rules():
    """The check above is not vacuous: the doc cites files with the functions that hold its rules."""
    cited = [span for span in design_spans() if ":" in span and is_tree_path(span.split(":")[0])]
    assert len(cited) >= 30


@pytest.mark.parametrize("span, problem", [
    ("taskgen/names.py: plain_name_check", None),
    ("taskgen/names.py: plain_name_rule_gone", "not defined"),
    ("taskgen/stages/judge/evidence.py: CHANGE_CAP, SCREENSHOT_CAP", None),
    ("taskgen/stages/judge/evidence.py: CHANGE_CAPS", "not defined"),
    ("taskgen/no_such_module.py", "no such file"),
    ("taskgen/engine/contract.py: StageWork.do_batch", None),
    ("taskgen/engine/contract.py: StageWork.no_such_field", "not defined"),
    ("taskgen.stages.no_such_stage", "no such module"),
    ("export_select_everything", "not in the app's code"),
    ("stage_works(name) -> StageWork", "not in the app's code"),
    ("DATA_ROOT/attempts/<name>/", None),
])
def test_the_check_finds_what_is_gone(span, problem):
    found = span_problems(span)
    assert (problem in found[0]) if problem else not found, found


def test_the_design_names_every_import_contract():
    """The layers section names each import-linter contract of pyproject.toml by its id, and no other."""
    ids = {contract["id"] for contract in import_contracts()}
    named = set(re.findall(r"^- `([\w-]+)`:", DESIGN.read_text(encoding="utf-8"), re.M))
    assert named == ids


def test_the_layers_table_is_the_layers_contract():
    """The layers table lists the `layers` contract's layers, top to bottom, each with the packages it holds."""
    contract = next(c for c in import_contracts() if c["type"] == "layers")
    expected = [{module_path(m.strip()) for m in re.split(r"[|:]", layer)} for layer in contract["layers"]]
    rows = design_layer_rows()
    assert rows == expected, f"DESIGN.md's layers table names {rows}; pyproject.toml's layers are {expected}"


def test_every_stage_on_the_engine_has_its_contract():
    """Each stage the engine runs has a row in the stages table (with its queue) and a section of its own."""
    from taskgen.engine.stage_table import stages_all

    rows = {row[0]: row[-1] for row in table_rows("## Each stage's contract", "| stage |")}
    stages = stages_all()
    assert rows == {name: work.queue for name, work in stages.items()}
    sections = re.findall(r"^### (\w+) ", DESIGN.read_text(encoding="utf-8"), re.M)
    assert set(stages) <= set(sections)


def test_readme_points_at_sections_the_design_has():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    headings = [line.lstrip("#").strip() for line in DESIGN.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")]
    pointers = SECTION_POINTER.findall(readme)
    missing = [title for title in pointers if not any(h.startswith(title) for h in headings)]
    assert not missing, f"README.md points at DESIGN.md sections it does not have: {missing}"
