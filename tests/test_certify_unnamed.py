"""A certificate selects its population and frame without the candidates' task ids and sites (SelectContext.names:
it reads neither, and each chunk of the export order then skips looking up its tasks): the certificate is the one a
named selection gives, the chunks' rows are the named ones less their names, and such a selection is never written."""
from __future__ import annotations

import dataclasses

import pytest

from taskgen.stages.certify import service
from taskgen.stages.certify.service import CertifyParams, certificate_compute
from taskgen.stages.export.order import SelectContext, _chunk, export_order
from taskgen.stages.export.select import ExportError, export_manifest, export_select
from tests.certify_helpers import judged_run, label_as_truth

pytestmark = pytest.mark.django_db


def test_a_certificate_without_names_is_the_certificate_with_them(monkeypatch):
    run, config, truth = judged_run(episodes=60, risky=10)
    params = CertifyParams(run=run, judge_config=config, target=0.8)
    first = certificate_compute(params=params, next_count=25)
    label_as_truth(first["next_episode_ids"], truth)  # the design's next episodes: their labels count
    unnamed = certificate_compute(params=params, cuts=True)
    monkeypatch.setattr(service, "SelectContext", lambda **_: SelectContext(names=True))
    named = certificate_compute(params=params, cuts=True)
    assert unnamed == named and unnamed["labels"] > 0 and unnamed["next"]


def test_unnamed_chunk_rows_are_the_named_rows_less_their_names():
    run, config, _ = judged_run(episodes=30, risky=5)
    ids = [int(pk) for pk in export_order(run)[0]]
    named, unnamed = _chunk(ids, config), _chunk(ids, config, names=False)
    assert unnamed.rows == [row._replace(task_id="", site="") for row in named.rows] and named.rows
    assert all(row.task_id and row.site for row in named.rows)
    assert dataclasses.replace(unnamed, rows=named.rows) == named


def test_a_selection_made_for_a_certificate_is_never_written():
    run, config, _ = judged_run(episodes=10, risky=0)
    selection = export_select(run=run, judge_config=config, context=SelectContext(names=False))
    assert selection.picked and not selection.named
    with pytest.raises(ExportError, match="certificate"):
        export_manifest(selection=selection)
    assert export_manifest(selection=export_select(run=run, judge_config=config))["episodes"]
