"""What the runs pages say about a pipeline run: how long it took, in words, and its parameters and result summary as
rows."""
from __future__ import annotations

import json
from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from taskgen.models import PipelineRun

# Keys a result carries for the machine (a whole manifest, the form values), not for a reader of the page.
HIDDEN_KEYS = {"manifest", "nothing_to_do", "summary_error", "started_with", "output_tail"}
LINKS = {"export_id": ("review:export_detail", "export #{}"), "run_id": ("review:run_detail", "run #{}")}


@dataclass(frozen=True)
class SummaryRow:
    name: str
    value: str
    url: str = ""


def started_words(pipeline_run: PipelineRun) -> tuple[bool, str]:
    """What to tell whoever just started a run: (True, "Started judge #4 (running).") or, for a run that had
    nothing to do and is finished already, (False, "judge #4 (done): Nothing to judge: ...")."""
    nothing = (pipeline_run.result or {}).get("nothing_to_do") if pipeline_run.is_finished else None
    if nothing:
        return False, f"{pipeline_run}: {sentence(nothing)}"
    return True, f"Started {pipeline_run}."


def sentence(words: str) -> str:
    """A stage's words ("nothing to judge: ...") as a sentence to show: capital first, full stop last."""
    return f"{words[:1].upper()}{words[1:]}."


def duration_words(seconds: float) -> str:
    """A duration a person reads at a glance: "0.4 s", "42 s", "3 min 12 s", "2 h 5 min" (never "0 minutes")."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s" if whole % 60 else f"{whole // 60} min"
    hours, minutes = whole // 3600, (whole % 3600) // 60
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def run_duration(pipeline_run: PipelineRun) -> str:
    """How long a run took (or has been running), in words, the time it sat cancelled before a resume left out;
    empty before it started."""
    seconds = pipeline_run.worked_seconds
    return "" if seconds is None else duration_words(seconds)


SCALARS = (bool, int, float, str)
SHOWN_AT_MOST = 12  # items of a short list or a flat record spelled out in one row


def _plain(value: object) -> bool:
    return value is None or isinstance(value, SCALARS)


def _scalar(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _shown(value: object) -> str | None:
    """A result value as one short line, or None for what a summary row cannot show (nested records): a short list
    of plain values is spelled out, a longer one or a list of records counted; a flat record (validate's figures)
    reads "name value · name value"."""
    if isinstance(value, SCALARS):
        return _scalar(value)
    if isinstance(value, list):
        if not value:
            return "none"
        if len(value) <= SHOWN_AT_MOST and all(_plain(v) for v in value):
            return ", ".join(_scalar(v) for v in value)
        return f"{len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict) and value and all(_plain(v) for v in value.values()):
        pairs = [f"{k.replace('_', ' ')} {_scalar(v)}" for k, v in sorted(value.items())[:SHOWN_AT_MOST]]
        return " · ".join(pairs) + (" · …" if len(value) > SHOWN_AT_MOST else "")
    return None


def _link(name: str, value: object) -> str:
    if name not in LINKS or not isinstance(value, int):
        return ""
    try:
        return reverse(LINKS[name][0], args=[value])
    except NoReverseMatch:
        return ""


def parameter_rows(params: dict | None) -> list[SummaryRow]:
    """A run's parameters as rows in name order, as its result reads (jsonb keeps no order), each value as the result
    shows one (yes/no, "—" for none, a flat record as "name value" pairs) or else as its JSON, without the form's own
    values it was started with."""
    return [SummaryRow(name=name.replace("_", " "), value=_parameter_value(value))
            for name, value in sorted((params or {}).items()) if name not in HIDDEN_KEYS]


def _parameter_value(value: object) -> str:
    if value is None or value == "":  # a field left blank (the provider's default model, no tasks file)
        return _scalar(None)
    shown = _shown(value)
    return json.dumps(value, ensure_ascii=False) if shown is None else shown


def result_rows(result: dict | None) -> list[SummaryRow]:
    """The result summary of a finished run as name/value rows, with links to what it made (an export, a run), in
    name order: PostgreSQL's jsonb does not keep a dict's order, and the page must read the same on any database."""
    rows = []
    for name, value in sorted((result or {}).items()):
        shown = _shown(value)
        if name in HIDDEN_KEYS or shown is None:
            continue
        url = _link(name, value)
        rows.append(SummaryRow(name=name.replace("_", " "), value=LINKS[name][1].format(value) if url else shown,
                               url=url))
    return rows
