"""Certify an export on the web: open a run and config's Certify queue, and the certificate panel shown on the
queue's page, Validate and Exports (review/certify_queue.py, taskgen/stages/certify/)."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from review.certify_queue import certify_queue_open
from taskgen.models import JudgeConfig, Run
from taskgen.roles import Role, require_role
from taskgen.stages.certify.service import CertifyError, CertifyParams, certificate_compute
from taskgen.stages.certify.target import certify_target_check
from taskgen.stages.export.select import ExportError
from taskgen.stages.lookup import judge_config_find, run_find
from taskgen.triage.risk import RiskError

ERRORS = (CertifyError, RiskError, ExportError)


def certify_choices(query: QueryDict) -> dict:
    """The run, judge config and export parameters a form or query names (CertifyError when one is missing or
    wrong); the only judge config of the run when it names none."""
    run = run_find(str(query.get("run") or ""))
    if run is None:
        raise CertifyError("choose a run to certify")
    config = judge_config_find(str(query.get("judge_config") or ""))
    if config is None:
        used = list(JudgeConfig.objects.filter(judgments__episode__run=run).distinct()[:2])
        if len(used) != 1:
            raise CertifyError("choose the judge config whose successes the export takes")
        config = used[0]
    return {"run": run, "judge_config": config, "source": query.get("source") or "judge",
            "exclude_risk": tuple(query.getlist("exclude_risk")),
            "target": certify_target_check(query.get("target")) or 0.9}


def certificate_for(run: Run, config: JudgeConfig, **choices) -> dict:
    """The certificate of an export of the run with the config's verdicts, its cuts included (for a panel)."""
    return certificate_compute(params=CertifyParams(run=run, judge_config=config, **choices), next_count=0, cuts=True)


@require_GET
@require_role(Role.VIEWER)
def certificate_panel(request: HttpRequest) -> HttpResponse:
    """The certificate panel of the export the query names (an htmx partial on Validate; a page of its own without
    JavaScript)."""
    try:
        choices = certify_choices(request.GET)
        context = {"cert": certificate_for(choices.pop("run"), choices.pop("judge_config"), **choices)}
    except ERRORS as exc:
        context = {"cert_error": str(exc)}
    template = "review/_certificate.html" if request.htmx else "review/certificate_page.html"
    return render(request, template, context, status=400 if "cert_error" in context else 200)


@require_POST
@require_role(Role.REVIEWER)
def certify_open(request: HttpRequest) -> HttpResponse:
    """Open (or make) the run and config's Certify queue, set to the export the form names."""
    try:
        queue = certify_queue_open(user=request.user, **certify_choices(request.POST))
    except ERRORS as exc:
        messages.error(request, str(exc))
        return redirect("review:queue_list")
    return redirect(queue)
