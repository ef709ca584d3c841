"""Sites that are not the sandbox: a sitemap JSON in the reference's format plus a base URL, pages fetched over HTTP
from a server on 127.0.0.1; a sitemap that is not JSON, and a base URL that does not answer, are named with the site
while the other sites go on."""
from __future__ import annotations

import dataclasses
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import call_command

from taskgen.engine import stage_table
from taskgen.engine.control import run_start
from taskgen.engine.worker import work
from taskgen.models import PipelineRun, Site, Task
from taskgen.stages.propose.context import ContextError
from taskgen.stages.propose.sites import external_site_register
from tests import propose_helpers
from tests.ports import free_port

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
pytestmark = pytest.mark.django_db
SITEMAP = {"name": "Miniweb Library", "pages": [
    {"path": "/sites/library/", "title": "Library — home"},
    {"path": "/sites/library/books/1/", "title": "The Silent Orchard — Library"},
    {"path": "/sites/library/loans/", "title": "My loans — Library"}],
    "controls": [{"kind": "select", "label": "Genre", "name": "genre", "page": "/sites/library/loans/",
                  "options": [{"text": "Poetry", "value": "poetry"}, {"text": "History", "value": "history"}]},
                 {"kind": "qa", "label": "harness answer box", "page": "/sites/library/"}]}


@pytest.fixture
def site_server():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            seen.append(self.path)
            if self.path == getattr(server, "fail", None):
                self.send_error(500)
                return
            body = (f"<html><title>x</title><script>secret()</script><h1>Page {self.path}</h1>"
                    "<p>Borrow “The Silent Orchard” by Ana Lírio</p></html>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.seen = seen
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_an_external_site_is_proposed_for_from_its_sitemap_and_base_url(db, site_server, tmp_path):
    (tmp_path / "library.json").write_text(json.dumps(SITEMAP), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    call_command("taskgen", "propose", "--sites", "library", "--sitemaps", str(tmp_path), "--base-url",
                 site_server.url, "--per-site", "4", "--batch", "4", stdout=out, stderr=err)
    site = Site.objects.get(slug="library")
    assert (site.base_url, site.home_path) == (site_server.url, "/sites/library/")
    assert "/sites/library/" in site_server.seen and "/sites/library/loans/" in site_server.seen
    assert Task.objects.filter(site=site).count() == 4 and "library: 4 tasks" in out.getvalue()
    batch = Task.objects.filter(site=site).first().proposal_batch
    assert "Page /sites/library/loans/" in batch.context and "secret()" not in batch.context
    assert "select 'Genre' [Poetry, History]" in batch.context and "harness answer box" not in batch.context


def test_a_sitemap_that_is_not_json_names_the_site_and_file(db, tmp_path):
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ContextError, match=r"site broken: .*broken.json is not JSON"):
        external_site_register(slug="broken", sitemap_file=tmp_path / "broken.json", base_url="http://127.0.0.1:1")
    (tmp_path / "nopages.json").write_text('{"name": "x"}', encoding="utf-8")
    with pytest.raises(ContextError, match="site nopages: its sitemap has no list of pages"):
        external_site_register(slug="nopages", sitemap_file=tmp_path / "nopages.json", base_url="http://127.0.0.1:1")
    assert not Site.objects.exists()


def test_a_bad_sitemap_on_the_command_line_is_named_and_the_other_sites_go_on(sandbox_sites, tmp_path):
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    err = io.StringIO()
    call_command("taskgen", "propose", "--sites", "broken,shop", "--sitemaps", str(tmp_path), "--base-url",
                 "http://127.0.0.1:1", "--per-site", "3", "--batch", "3", stdout=io.StringIO(), stderr=err)
    assert "site broken:" in err.getvalue() and "is not JSON" in err.getvalue()
    assert Task.objects.filter(site__slug="shop").count() == 3


def test_a_base_url_that_does_not_answer_fails_that_site_only(sandbox_sites, monkeypatch):
    monkeypatch.setitem(stage_table.ENGINE_STAGES, "propose",
                        dataclasses.replace(stage_table.stage_work("propose"), max_attempts=1))
    Site.objects.create(slug="down", sitemap=SITEMAP, base_url=_closed_port_url())
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "down,shop",
                                                                      "per_site": 3, "batch": 3})
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    pipeline_run.refresh_from_db()
    failed = pipeline_run.units.filter(status="failed")
    assert {u.key.split(":")[0] for u in failed} == {"down"} and failed.count() == 3
    assert all("site down:" in u.last_error and "does not answer" in u.last_error for u in failed)
    assert Task.objects.filter(site__slug="shop").count() == 3 and pipeline_run.failed == 3


def test_a_page_that_fails_is_named_in_the_runs_summary_and_the_site_goes_on(db, site_server):
    pages = [*SITEMAP["pages"], {"path": "/sites/library/broken/", "title": "Broken"}]
    controls = [{"kind": "button", "label": f"Button {k}", "page": "/sites/library/broken/"} for k in range(3)]
    Site.objects.create(slug="library", sitemap={**SITEMAP, "pages": pages, "controls": controls},
                        base_url=site_server.url)
    site_server.fail = "/sites/library/broken/"
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "library",
                                                                      "per_site": 2, "batch": 2})
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    pipeline_run.refresh_from_db()
    line = pipeline_run.result["site library"]
    assert line.startswith("2 tasks") and "site library, page /sites/library/broken/: could not render" in line
