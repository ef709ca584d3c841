"""The validate page: a judge config against verifiers or humans, with intervals, breakdowns, charts, the false
positives one click away, and downloads (figures as JSON and CSV, false positives as task-id lines)."""
from __future__ import annotations

import csv
from decimal import Decimal
from urllib.parse import urlencode

from django import forms
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from review.charts import confusion_heatmap, site_intervals_chart
from review.links import random_sample_episodes, review_queue_url_for
from taskgen.models import JudgeConfig, Run
from taskgen.roles import Role, require_role
from taskgen.stages.validate.humans import (
    human_agreement,
    judge_reviewer_agreement,
    reviewer_agreement,
    validate_humans,
)
from taskgen.stages.validate.service import (
    AGAINST_CHOICES,
    ValidateError,
    default_config,
    validate_compare,
    validate_compute,
    validate_false_positive_task_ids,
    validate_sample_estimate,
)
from taskgen.stats import REFERENCE_KEYS


class ValidateForm(forms.Form):
    runs = forms.ModelMultipleChoiceField(queryset=Run.objects.order_by("-created_at"),
                                          help_text="one run, or several measured together")
    config = forms.ModelChoiceField(queryset=JudgeConfig.objects.order_by("provider", "model", "prompt_version"),
                                    required=False, label="judge config",
                                    empty_label="the most used on these runs")
    compare = forms.ModelChoiceField(queryset=JudgeConfig.objects.order_by("provider", "model", "prompt_version"),
                                     required=False, label="side by side with", empty_label="(no second config)")
    against = forms.ChoiceField(choices=list(AGAINST_CHOICES.items()), initial="verifier", label="ground truth",
                                required=False)
    reviewer = forms.ModelChoiceField(queryset=get_user_model().objects.filter(labels__isnull=False).distinct()
                                      .order_by("username"), required=False,
                                      help_text="only for “one reviewer's labels”")

    def clean(self) -> dict:
        data = super().clean()
        data["against"] = data.get("against") or "verifier"
        if data.get("against") == "reviewer" and not data.get("reviewer"):
            self.add_error("reviewer", "Choose whose labels are the ground truth.")
        if data.get("compare") and data.get("compare") == data.get("config"):
            self.add_error("compare", "Choose a different config to compare with.")
        return data


SAME_CONFIG = ("{config} is already the judge config shown (the most used on these runs): a side by side with itself "
               "compares nothing. Choose a different config to compare with.")


def _form(request: HttpRequest) -> ValidateForm:
    """The submitted choices; with none, the newest run against its verifiers, so the page opens on figures."""
    if request.GET:
        return ValidateForm(request.GET)
    latest = Run.objects.order_by("-created_at").values_list("pk", flat=True).first()
    return ValidateForm(QueryDict(f"runs={latest}&against=verifier") if latest else None)


def _choices(form: ValidateForm) -> dict | None:
    """Cleaned choices with the default config filled in, or None when the form (or the runs' judgments) fall short."""
    if not form.is_valid():
        return None
    data = dict(form.cleaned_data)
    runs = list(data["runs"])
    data["runs"] = runs
    data["config"] = data["config"] or default_config(runs=runs)
    if data["compare"] and data["compare"] == data["config"]:  # the default config picked as its own comparison
        form.add_error("compare", SAME_CONFIG.format(config=data["config"]))
        return None
    return data if data["config"] else None


def _sample(runs: list[Run], config: JudgeConfig, report) -> dict:
    """The sample estimate: from the random-sample queue once it is wired, else from every final label."""
    sample = random_sample_episodes(runs)
    return report.sample if sample is None else validate_sample_estimate(runs=runs, config=config, sample=sample)


def _results(data: dict) -> dict:
    runs, config, against, reviewer = data["runs"], data["config"], data["against"], data["reviewer"]
    comparison = None
    if data["compare"]:  # one grouped scan gives both the config's report and the side by side (figures only)
        comparison = validate_compare(runs=runs, config_a=config, config_b=data["compare"], against=against,
                                      reviewer=reviewer, list_limit=0)
        report = comparison["alone"]
    else:
        report = validate_compute(runs=runs, config=config, against=against, reviewer=reviewer)
    results = {"report": report, "heat": confusion_heatmap(report.figures),
               "site_chart": site_intervals_chart(report.per_site),
               "sample": _sample(runs, config, report),
               "judge_vs_reviewers": judge_reviewer_agreement(runs=runs, config=config),
               "fp_queue_url": review_queue_url_for([row["episode_id"] for row in report.false_positives]),
               "fn_queue_url": review_queue_url_for([row["episode_id"] for row in report.false_negatives])}
    if comparison:
        results["comparison"] = comparison
    if len(runs) == 1:  # a certificate is of one run's export; its panel loads after the page (review/views/certify)
        results["cert_query"] = urlencode({"run": runs[0].name, "judge_config": config.key})
    return results


@require_GET
@require_role(Role.VIEWER)
def validate_page(request: HttpRequest) -> HttpResponse:
    form = _form(request)
    context = {"form": form, "query": form.data.urlencode() if form.is_bound else ""}
    data = _choices(form)
    if form.is_valid():  # humans' agreement needs no judge: shown whether or not the runs are judged
        runs = list(form.cleaned_data["runs"])
        human = human_agreement(runs=runs)
        context.update(reviewer_pairs=reviewer_agreement(runs=runs), human=human,
                       human_rows=[("three categories (UNSURE counted)", human["with_unsure"]),
                                   ("two categories (pairs with an UNSURE left out)", human["without_unsure"])])
    if form.is_valid() and data is None:
        context["no_judgments"] = True
    elif data is not None:
        try:
            context.update(_results(data), config=data["config"], compare_config=data["compare"],
                           against_label=AGAINST_CHOICES[data["against"]])
        except ValidateError as error:
            form.add_error(None, str(error))
    return render(request, "review/validate.html", context)


def _download_choices(request: HttpRequest, *, judge_needed: bool = True) -> dict:
    """The choices a download names; without a judge config on the runs, `config` is None (the humans' agreement
    needs none) unless the download needs a judge, which is then a ValidateError."""
    query = request.GET.copy()
    query.pop("compare", None)  # a download has the one config's figures: the side by side plays no part
    form = ValidateForm(query)
    data = _choices(form)
    if data is None and form.is_valid() and not judge_needed:
        return {**form.cleaned_data, "runs": list(form.cleaned_data["runs"]), "config": None}
    if data is None:
        raise ValidateError("choose runs that have judgments (and a reviewer for one reviewer's labels)")
    return data


def _download_report(request: HttpRequest, *, list_limit: int | None) -> tuple[dict, object]:
    """The choices a download names and the report they give (None without a judge config on the runs: the humans'
    agreement is then all there is); ValidateError when the choices fall short."""
    data = _download_choices(request, judge_needed=False)
    if data["config"] is None:
        return data, None
    report = validate_compute(runs=data["runs"], config=data["config"], against=data["against"],
                              reviewer=data["reviewer"], list_limit=list_limit)
    return data, report


def _bad_request(error: ValidateError) -> HttpResponse:
    return HttpResponse(f"{error}\n", status=400, content_type="text/plain; charset=utf-8")


NO_JUDGE = "No judge config has judged these runs: the judge's figures need a judge run; the humans' need none."


@require_GET
@require_role(Role.VIEWER)
def validate_json(request: HttpRequest) -> HttpResponse:
    try:
        data, report = _download_report(request, list_limit=None)
    except ValidateError as error:
        return _bad_request(error)
    humans = validate_humans(runs=data["runs"], config=data["config"])
    if report is None:
        body = {"reference": None, "judge": None, "note": NO_JUDGE, "runs": [run.name for run in data["runs"]],
                **humans}
    else:
        body = {"reference": report.reference_line, **report.as_dict(), **humans}
    response = JsonResponse(body, json_dumps_params={"indent": 1, "ensure_ascii": False})
    response["Content-Disposition"] = 'attachment; filename="validate.json"'
    return response


CSV_COLUMNS = ["scope", "name", *REFERENCE_KEYS, "f1", "kappa", "precision_low", "precision_high", "recall_low",
               "recall_high", "agreement_low", "agreement_high", "kappa_low", "kappa_high"]


def csv_cell(value) -> str:
    """One CSV cell. Numbers are written as numbers (a kappa of -0.016 stays a number for pandas and spreadsheets);
    only text that a spreadsheet would run as a formula (a site named "=HYPERLINK(...)") is quoted."""
    if value is None:
        return ""
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _csv_row(scope: str, name: str, figures: dict) -> list[str]:
    low_high = [*(figures["precision_ci"] or (None, None)), *(figures["recall_ci"] or (None, None))]
    values = [scope, name, *(figures[key] for key in REFERENCE_KEYS), figures["f1"], figures["kappa"], *low_high]
    return [csv_cell(value) for value in values]


def _csv_humans_rows(humans: dict) -> list[list[str]]:
    """The humans' agreement in the same columns: `episodes` holds the pairs (pooled) or the episodes both labelled
    (a pair of reviewers), with agreement and kappa and, pooled, their intervals; the judge's columns stay empty."""
    rows = []
    for name, row in humans["human_agreement"].items():
        cells = {"episodes": row["pairs"], "agreement": row["agreement"], "kappa": row["kappa"],
                 "agreement_low": (row["agreement_ci"] or (None, None))[0],
                 "agreement_high": (row["agreement_ci"] or (None, None))[1],
                 "kappa_low": (row["kappa_ci"] or (None, None))[0], "kappa_high": (row["kappa_ci"] or (None, None))[1]}
        rows.append(["humans_pooled", name, *(cells.get(column) for column in CSV_COLUMNS[2:])])
    for pair in humans["reviewer_agreement"]:
        cells = {"episodes": pair["episodes"], "agreement": pair["agreement"], "kappa": pair["kappa"]}
        rows.append(["reviewer_pair", f"{pair['a']} vs {pair['b']}", *(cells.get(c) for c in CSV_COLUMNS[2:])])
    return [[csv_cell(value) for value in row] for row in rows]


@require_GET
@require_role(Role.VIEWER)
def validate_csv(request: HttpRequest) -> HttpResponse:
    """The judge's figures (all, per site, per task kind) when the runs are judged, then the humans' agreement."""
    try:
        data, report = _download_report(request, list_limit=0)
    except ValidateError as error:
        return _bad_request(error)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="validate.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    if report is not None:
        writer.writerow(_csv_row("all", "all", report.figures))
        for scope, rows in (("site", report.per_site), ("task_kind", report.per_kind)):
            for row in rows:
                writer.writerow(_csv_row(scope, row["name"], row))
    writer.writerows(_csv_humans_rows(validate_humans(runs=data["runs"])))
    return response


@require_GET
@require_role(Role.VIEWER)
def validate_false_positives(request: HttpRequest) -> HttpResponse:
    """The false positives as the reference's task-id lines: one task_id a line."""
    try:
        data = _download_choices(request)
        task_ids = validate_false_positive_task_ids(runs=data["runs"], config=data["config"],
                                                    against=data["against"], reviewer=data["reviewer"])
    except ValidateError as error:
        return _bad_request(error)
    response = HttpResponse("".join(f"{task_id}\n" for task_id in task_ids), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="false_positives.txt"'
    return response

