"""`taskgen certify RUN`: the certificate of an export's precision, as one JSON object (thin: parse, compute)."""
from __future__ import annotations

import argparse
import json

from taskgen.models import Export
from taskgen.stages.certify.target import SOURCES, CertifyError
from taskgen.stages.export.command import find_judge_config, find_run
from taskgen.stages.export.select import ExportError
from taskgen.triage.risk import RISK_NAMES, RiskError, risk_names_check

NAME = "certify"
HELP = ("Certify the precision of what `taskgen rows RUN` would export: the share of real successes, estimated from "
        "the labels a random design drew, with a one-sided lower bound valid however long you label; prints one "
        "JSON object (population, labels, estimate, lower, target, certified, method, next: the task ids to label "
        "next). Label them in the Certify queue or with `taskgen labels import`.")


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="the run: its name, its id, or the run dir it was imported from")
    parser.add_argument("--judge", default=None, help="judge config (provider:model:prompt:images, or its id); "
                                                      "needed when the run has verdicts from more than one")
    parser.add_argument("--source", default=Export.Selection.JUDGE, choices=[str(s) for s in SOURCES],
                        help="the export's source (default %(default)s)")
    parser.add_argument("--exclude-risk", default="", help=f"leave out episodes holding these risks, comma "
                                                           f"separated: {', '.join(RISK_NAMES)}")
    parser.add_argument("--budget", default=None, help="the export's step budget (default: the export's)")
    parser.add_argument("--target", type=_share, default=0.9, help="precision to certify (default %(default)s)")
    parser.add_argument("--confidence", type=_share, default=0.95, help="of the lower bound (default %(default)s)")
    parser.add_argument("--min-reviewer-accuracy", type=_share, default=None,
                        help="leave out the labels of reviewers below this accuracy on known-truth checks")
    parser.add_argument("--next", type=int, default=20, dest="next_count", help="task ids to label next (default "
                                                                                 "%(default)s)")
    parser.add_argument("--cuts", action="store_true", help="add the table of cuts of the riskiest strata")
    parser.add_argument("--json", action="store_true", help="(the output is always one JSON object)")


def run(options: dict, stdout, stderr) -> int:
    # The certificate's statistics (numpy) load when this command runs, not with every `taskgen` command's parser.
    from taskgen.stages.certify.service import CertifyParams, certificate_compute

    try:
        the_run = find_run(options["run"])
        params = CertifyParams(run=the_run, judge_config=find_judge_config(options["judge"], the_run),
                               source=options["source"], exclude_risk=risk_names_check(options["exclude_risk"]),
                               budget=options["budget"], target=options["target"], confidence=options["confidence"],
                               min_reviewer_accuracy=options["min_reviewer_accuracy"])
        certificate = certificate_compute(params=params, next_count=max(0, options["next_count"]),
                                          cuts=options["cuts"])
    except (CertifyError, ExportError, RiskError) as exc:
        stderr.write(f"certify: {exc}")
        return 2
    certificate.pop("labels_used")  # its hash stays; the list is in the manifest of a gated export
    stdout.write(json.dumps(certificate, indent=1))
    return 0
