"""The export gate: `taskgen rows --certify` and the export's "certified at least" write nothing unless the lower
bound for the exact set being written reaches the target, and a gated export keeps its certificate in the manifest
and in _certificate.json, which a recomputation from the labels matches."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from taskgen.models import Episode, Export
from taskgen.stages.certify.service import CertifyParams, certificate_compute, certificate_of, labels_sha256
from taskgen.stages.export.select import ExportError, export_select
from taskgen.stages.export.service import export_create
from tests.certify_helpers import judged_run, label_as_truth

pytestmark = pytest.mark.django_db(transaction=True)


def _rows(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("taskgen", "rows", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exited:
        code = exited.code
    return code, out.getvalue(), err.getvalue()


def _label_until_certified(run, config, truth, target: float) -> dict:
    params = CertifyParams(run=run, judge_config=config, target=target)
    cert = certificate_compute(params=params, next_count=10)
    while not cert["certified"] and cert["next"]:
        ids = dict(Episode.objects.filter(task__task_id__in=cert["next"]).values_list("task__task_id", "pk"))
        label_as_truth([ids[t] for t in cert["next"]], truth)
        cert = certificate_compute(params=params, next_count=10)
    return cert


def test_the_gate_refuses_then_permits_and_the_manifest_keeps_a_certificate_that_recomputes(settings):
    run, config, truth = judged_run(episodes=40, risky=6, rest_rate=1.0)
    out = Path(settings.DATA_ROOT) / "gated"
    code, _, err = _rows(run.name, "--out", str(out), "--certify", "0.8")
    assert code == 2 and "not certified" in err and "more labels" in err and "Certify queue" in err
    assert not out.exists() or not any(out.iterdir())
    assert not Export.objects.exists()

    _label_until_certified(run, config, truth, 0.8)
    code, stdout, err = _rows(run.name, "--out", str(out), "--certify", "0.8")
    assert code == 0, err
    written = json.loads((out / "_certificate.json").read_text())
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["certificate"] == written and written["certified"] and written["lower"] >= 0.8
    assert set(json.loads((out / "_report.json").read_text())) == {  # the reference's keys, none added
        "run", "candidates", "selected_trajectories", "selected_rows", "budget", "short_by", "sites"}
    assert written["population"] == len(manifest["episodes"])

    selection = export_select(run=run, judge_config=config)  # anyone can check it later from the labels
    again = certificate_of(selection=selection, params=CertifyParams(run=run, judge_config=config, target=0.8),
                           seed=written["seed"])
    for key in ("population", "labels", "estimate", "lower", "labels_sha256", "method"):
        assert again[key] == written[key], key
    assert labels_sha256(written["labels_used"]) == written["labels_sha256"]
    assert all(0 < label["probability"] <= 1 for label in written["labels_used"])


def test_a_download_export_with_certified_at_least_refuses_with_the_labels_needed():
    run, config, _ = judged_run(episodes=20, risky=4)
    with pytest.raises(ExportError, match=r"not certified.*about \d+ more label"):
        export_create(run=run, source="judge", judge_config=config, certify=0.9)
    assert not Export.objects.exists()
    with pytest.raises(ExportError, match="between 0 and 1"):
        export_create(run=run, source="judge", judge_config=config, certify="90%")
