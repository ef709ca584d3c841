"""Certify an export (taskgen/stages/certify/): the population is the export's, labels count only in the design's
order, labelling the design's next episodes reaches a certificate, and the command prints it."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from taskgen.models import CertifyDesign, Episode
from taskgen.stages.certify.design import in_design_order
from taskgen.stages.certify.service import CertifyError, CertifyParams, certificate_compute
from taskgen.stages.export.select import export_select
from tests.certify_helpers import judged_run, label_as_truth

pytestmark = pytest.mark.django_db


def _ids(task_ids):
    found = dict(Episode.objects.filter(task__task_id__in=task_ids).values_list("task__task_id", "pk"))
    return [found[t] for t in task_ids]


def test_the_population_is_exactly_what_the_export_writes():
    run, config, _ = judged_run()
    cert = certificate_compute(params=CertifyParams(run=run, judge_config=config))
    picked = export_select(run=run, judge_config=config).picked
    assert cert["population"] == len(picked) == 40 and cert["steps"] == 80
    assert cert["labels"] == 0 and cert["estimate"] is None and cert["lower"] == 0 and not cert["certified"]
    assert {s["name"]: s["episodes"] for s in cert["strata"]} == {"inconsistent": 8, "rest": 32}
    risky = {e.task.task_id for e in Episode.objects.filter(judgments__inconsistent=True)}
    assert len(cert["next"]) == 20 and len(risky & set(cert["next"][:2])) == 1  # each stratum gets a label first


def test_the_seed_is_drawn_once_and_orders_every_subset_the_same_way():
    run, config, _ = judged_run(episodes=10, risky=0)
    first = certificate_compute(params=CertifyParams(run=run, judge_config=config), next_count=10)
    again = certificate_compute(params=CertifyParams(run=run, judge_config=config), next_count=10)
    assert CertifyDesign.objects.count() == 1 and first["seed"] == again["seed"] and first["next"] == again["next"]
    ids = _ids(first["next"])
    assert in_design_order(first["seed"], ids[::-1]) == ids
    assert in_design_order(first["seed"], ids[3:][::-1]) == ids[3:]


def test_labelling_the_designs_next_episodes_certifies_and_rejected_ones_leave_the_export():
    run, config, truth = judged_run(episodes=60, risky=10)
    params = CertifyParams(run=run, judge_config=config, target=0.85)
    cert = certificate_compute(params=params, next_count=5)
    rounds = 0
    while not cert["certified"] and cert["next"]:
        label_as_truth(_ids(cert["next"]), truth)
        cert = certificate_compute(params=params, next_count=5)
        rounds += 1
    assert cert["certified"] and cert["lower"] >= 0.85
    rejected = sum(1 for pk, ok in truth.items() if not ok and Episode.objects.get(pk=pk).labels.exists())
    assert cert["population"] == 60 - rejected
    assert cert["labels"] < 60 and cert["labels_not_counted"] == 0
    true_precision = (sum(truth.values())) / cert["population"]
    assert cert["lower"] <= true_precision


def test_labels_given_in_risk_order_do_not_count_until_the_design_reaches_them():
    run, config, truth = judged_run(episodes=30, risky=6)
    params = CertifyParams(run=run, judge_config=config)
    first = certificate_compute(params=params, next_count=2)
    risky = list(Episode.objects.filter(run=run, judgments__inconsistent=True).values_list("pk", flat=True))
    order = in_design_order(first["seed"], risky)
    label_as_truth(order[1:], truth)  # the audit labels every risky episode but the design's first
    cert = certificate_compute(params=params, next_count=2)
    risky_stratum = next(s for s in cert["strata"] if s["name"] == "inconsistent")
    assert cert["labels"] == 0 and risky_stratum["not_counted"] == 5 and cert["next"] == first["next"]
    label_as_truth(_ids(cert["next"]), truth)  # the design's first of each stratum: the walk reaches the audit's
    cert = certificate_compute(params=params)
    risky_stratum = next(s for s in cert["strata"] if s["name"] == "inconsistent")
    assert risky_stratum["labelled"] >= 1 and risky_stratum["labelled"] + risky_stratum["not_counted"] == 6
    assert cert["labels"] >= 2


def test_cuts_leave_the_riskiest_strata_out_each_with_its_own_population():
    run, config, truth = judged_run(episodes=30, risky=6)
    cert = certificate_compute(params=CertifyParams(run=run, judge_config=config), cuts=True)
    by_cut = {tuple(row["exclude_risk"]): row for row in cert["cuts"]}
    assert by_cut[()]["population"] == 30 and by_cut[("inconsistent",)]["population"] == 24
    assert by_cut[("inconsistent",)]["steps"] == 48


def test_bad_parameters_are_refused_with_the_reason():
    run, config, _ = judged_run(episodes=2, risky=0)
    with pytest.raises(CertifyError, match="target"):
        CertifyParams(run=run, judge_config=config, target=1.5)
    with pytest.raises(CertifyError, match="source"):
        CertifyParams(run=run, judge_config=config, source="human")


def test_the_command_prints_one_json_object():
    run, config, _ = judged_run(episodes=12, risky=2)
    out = io.StringIO()
    call_command("taskgen", "certify", run.name, "--next", "3", "--json", stdout=out)
    cert = json.loads(out.getvalue())
    for key in ("population", "labels", "estimate", "lower", "target", "certified", "method", "next"):
        assert key in cert
    assert len(cert["next"]) == 3 and cert["target"] == 0.9 and cert["certified"] is False


def test_the_command_refuses_an_unknown_risk(capsys):
    run, config, _ = judged_run(episodes=2, risky=0)
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("taskgen", "certify", run.name, "--exclude-risk", "nonsense", stderr=err)
    assert exited.value.code == 2 and "unknown risk nonsense" in err.getvalue()


def test_validates_sample_estimate_counts_only_the_labels_the_design_drew():
    """Seen 2 of issue 22: the audit's labels (riskiest first) used to count as a random sample."""
    from taskgen.stages.validate.service import validate_sample_estimate
    run, config, truth = judged_run(episodes=30, risky=6)
    risky = Episode.objects.filter(run=run, judgments__inconsistent=True).values_list("pk", flat=True)
    label_as_truth(risky, truth)  # the false-positive audit: the riskiest first
    before = validate_sample_estimate(runs=[run], config=config)
    assert before["judged_success"]["labelled"] == 0 and before["precision"] is None
    params = CertifyParams(run=run, judge_config=config)
    for _ in range(4):
        label_as_truth(_ids(certificate_compute(params=params, next_count=5)["next"]), truth)
    cert = certificate_compute(params=params)
    after = validate_sample_estimate(runs=[run], config=config)
    assert after["judged_success"]["labelled"] == cert["labels"] > 0
    assert after["labels_not_counted"] + after["judged_success"]["labelled"] == 26  # the rest wait for the walk
    low, high = after["precision_ci"]
    assert low <= sum(truth.values()) / 30 <= high


def test_a_certificate_can_leave_out_the_labels_of_reviewers_below_an_accuracy(monkeypatch):
    from tests.factories import UserFactory
    run, config, truth = judged_run(episodes=20, risky=4)
    params = CertifyParams(run=run, judge_config=config)
    careless = UserFactory(username="careless", role="reviewer")
    theirs = certificate_compute(params=params, next_count=6)["next"]
    label_as_truth(_ids(theirs), truth, reviewer=careless)
    assert certificate_compute(params=params)["labels"] >= 3
    monkeypatch.setattr("taskgen.labels.quality.reviewers_below", lambda **kwargs: {careless.pk})
    trusted = certificate_compute(params=CertifyParams(run=run, judge_config=config, min_reviewer_accuracy=0.8))
    assert trusted["labels"] == 0 and trusted["min_reviewer_accuracy"] == 0.8
    assert theirs[0] in trusted["next"]  # what only they labelled is served again
