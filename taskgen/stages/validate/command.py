"""`taskgen validate RUN [--against verifier|human] [--judge CONFIG] [--json]`: the judge against the verifiers (or
final human labels). The first line is the reference's JSON line; the figures it lacks follow. A run nobody has
judged still has its humans' agreement: then that alone is printed (one JSON object with --json, `"judge": null`)
and stderr says the judge's figures need a judge run."""
from __future__ import annotations

import argparse
import json

from taskgen.stages.lookup import judge_config_find, run_find
from taskgen.stages.validate.humans import validate_humans
from taskgen.stages.validate.service import ValidateError, ValidateReport, default_config, validate_compute

NAME = "validate"
HELP = "Measure a judge config against verifier results or final human labels on a run."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run name (or id)")
    parser.add_argument("--against", choices=["verifier", "human"], default="verifier")
    parser.add_argument("--judge", default=None,
                        help="judge config key provider:model:prompt:images, or its id (default: most used on the run)")
    parser.add_argument("--json", action="store_true", help="print the extra figures as one JSON object")


def _text(report: ValidateReport) -> list[str]:
    f = report.figures
    lines = [
        f"judge {report.config} against {report.against} on {', '.join(report.runs)}",
        f"  F1 {f['f1']}  kappa {f['kappa']}  precision 95% CI {f['precision_ci']}  recall 95% CI {f['recall_ci']}",
        f"  left out: {report.unjudged} with a truth but no verdict ({report.unjudged_no_verdict} answered without"
        f" one), {report.judged_without_truth} judged without a truth",
        f"  cost: ${report.cost_usd:.4f} for {report.judgments} judgments"
        + (f" (${report.cost_per_1000} per 1,000 episodes)" if report.cost_per_1000 is not None else ""),
    ]
    for title, rows in (("per site", report.per_site), ("per task kind", report.per_kind)):
        lines.append(f"{title}:")
        lines += [f"  {r['name']}: n={r['episodes']} precision={r['precision']} {r['precision_ci']} "
                  f"recall={r['recall']} {r['recall_ci']} tp={r['tp']} fp={r['fp']} fn={r['fn']} tn={r['tn']}"
                  for r in rows]
    lines.append(f"false positives ({report.figures['fp']}): "
                 + " ".join(row["task_id"] for row in report.false_positives))
    return lines


def run(options: dict, stdout, stderr) -> int:
    run_row = run_find(options["run"])
    if run_row is None:
        stderr.write(f"no run named {options['run']!r}: import it first (see `taskgen --help`)")
        return 2
    config = judge_config_find(options["judge"]) if options["judge"] else default_config(runs=[run_row])
    if config is None and options["judge"]:
        stderr.write(f"no judge config {options['judge']!r}")
        return 2
    if config is None:
        return _humans_only(run_row, options, stdout, stderr)
    try:
        report = validate_compute(runs=[run_row], config=config, against=options["against"], list_limit=None)
    except ValidateError as error:
        stderr.write(str(error))
        return 2
    stdout.write(json.dumps(report.reference_line))
    humans = validate_humans(runs=[run_row], config=config)
    if options["json"]:
        stdout.write(json.dumps({**report.as_dict(), **humans}, default=str))
    else:
        stdout.write("\n".join(_text(report) + _humans_text(humans)))
    return 0


def _humans_only(run_row, options: dict, stdout, stderr) -> int:
    """A run nobody has judged: the agreement between humans needs no judge, so it is printed alone."""
    stderr.write(f"run {run_row.name} has no judgments yet: the judge's figures need a judge run (`taskgen judge "
                 f"{run_row.name}`); the agreement between humans needs none")
    humans = validate_humans(runs=[run_row])
    if options["json"]:
        stdout.write(json.dumps({"judge": None, "runs": [run_row.name], **humans}, default=str))
    else:
        stdout.write("\n".join(_humans_text(humans)))
    return 0


def _humans_text(humans: dict) -> list[str]:
    lines = ["agreement between humans (pooled over episodes labelled twice):"]
    for name, row in humans["human_agreement"].items():
        lines.append(f"  {name.replace('_', ' ')}: {row['pairs']} pairs, agreement {row['agreement']} "
                     f"{row['agreement_ci']}, kappa {row['kappa']} "
                     f"{row['kappa_ci'] or '(no interval: ' + row['kappa_ci_why'] + ')'}")
    lines += [f"  {p['a']} vs {p['b']}: {p['episodes']} episodes, agreement {p['agreement']}, kappa {p['kappa']}"
              for p in humans["reviewer_agreement"]]
    return lines
