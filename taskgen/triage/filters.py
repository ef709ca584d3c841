"""One filter vocabulary for episodes: the run table's URL, a saved queue's filters and the queue form all read it.

A filter is checked once at the edge (`episode_filter_parse`): an unknown site, run, verdict or state is refused with
a message naming it, never saved or silently ignored. It is stored on a queue as a plain dict (`as_stored`), shown in
words (`describe`), and turned into one condition on Episode (`condition`): every part a subquery over Episode, never
a join, so a queue's queryset can still be locked with SELECT ... FOR UPDATE SKIP LOCKED.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from operator import or_

from django.db.models import Exists, OuterRef, Q, QuerySet

from taskgen.labels.rule import needs_adjudication
from taskgen.models import (
    Episode,
    FinalLabel,
    JudgeConfig,
    Judgment,
    Label,
    LabelVerdict,
    Run,
    Site,
    Task,
    VerifierResult,
)

VERDICTS = {"SUCCESS": "SUCCESS", "NOT SUCCESS": "NOT SUCCESS", "NONE": "no verdict", "UNJUDGED": "not judged"}
VERIFIER = {"pass": "passed", "fail": "failed", "none": "no verifier"}
LABEL_STATES = {"unlabelled": "no label yet", "labelled": "labelled", "adjudicate": "waiting for an adjudicator",
                "final-success": "final label Success", "final-not-success": "final label Not success",
                "final-unsure": "final label Unsure"}
TASK_KINDS = dict(Task.Kind.choices)
STORED_KEYS = ("runs", "sites", "task_kind", "verdicts", "verifier", "label_state", "disagree", "unsupported",
               "search", "tags")


class FilterError(ValueError):
    """A filter naming something that does not exist; the message lists every such value."""


@dataclass
class EpisodeFilter:
    """Which episodes to show or queue. `config_id` is whose verdicts the verdict, disagreement and unsupported
    parts read (None: any judge config's)."""

    runs: list[int] = field(default_factory=list)
    sites: list[str] = field(default_factory=list)
    task_kind: str = ""
    verdicts: list[str] = field(default_factory=list)
    verifier: str = ""
    label_state: str = ""
    disagree: bool = False
    unsupported: bool = False
    search: str = ""
    tags: list[str] = field(default_factory=list)
    config_id: int | None = None

    def as_stored(self) -> dict:
        """The filter as a queue keeps it: only what is set."""
        return {key: getattr(self, key) for key in STORED_KEYS if getattr(self, key)}

    @property
    def is_empty(self) -> bool:
        return not self.as_stored()


def _split(data, name: str) -> list[str]:
    """A field given as repeated values, comma-separated text, or both."""
    values = data.getlist(name) if hasattr(data, "getlist") else data.get(name) or []
    values = values if isinstance(values, list) else [values]
    return list(dict.fromkeys(v.strip() for value in values for v in str(value).split(",") if v.strip()))


def _flag(data, name: str) -> bool:
    value = data.get(name)
    return value is True or str(value).lower() in ("1", "on", "true", "yes")


def _one_of(value: str, choices: dict, what: str, errors: list[str]) -> str:
    if value and value not in choices:
        errors.append(f"unknown {what} {value!r}: use one of {', '.join(choices)}")
        return ""
    return value


def _known(values: list, found: set, what: str, errors: list[str]) -> list:
    if missing := [v for v in values if v not in found]:
        errors.append(f"no {what} {', '.join(map(str, missing[:10]))}")
    return [v for v in values if v in found]


def episode_filter_parse(data, *, config_id: int | None = None) -> EpisodeFilter:
    """A filter from a query string, a form or a stored dict; FilterError names every unknown value."""
    errors: list[str] = []
    raw_runs = _split(data, "runs")
    runs = [int(r) for r in raw_runs if r.isdigit() and len(r) < 15]
    errors += [f"no run {r!r}" for r in raw_runs if not (r.isdigit() and len(r) < 15)]
    runs = _known(runs, set(Run.objects.filter(pk__in=runs).values_list("pk", flat=True)), "run", errors)
    sites = _split(data, "sites")
    sites = _known(sites, set(Site.objects.filter(slug__in=sites).values_list("slug", flat=True)), "site", errors)
    verdicts = [v for v in _split(data, "verdicts") if _one_of(v, VERDICTS, "judge verdict", errors)]
    found = EpisodeFilter(
        runs=runs, sites=sites, verdicts=verdicts, tags=_split(data, "tags"), config_id=config_id,
        task_kind=_one_of(str(data.get("task_kind") or ""), TASK_KINDS, "task kind", errors),
        verifier=_one_of(str(data.get("verifier") or ""), VERIFIER, "verifier state", errors),
        label_state=_one_of(str(data.get("label_state") or ""), LABEL_STATES, "label state", errors),
        disagree=_flag(data, "disagree"), unsupported=_flag(data, "unsupported"),
        search=" ".join(str(data.get("search") or "").split())[:200])
    if config_id is not None and not JudgeConfig.objects.filter(pk=config_id).exists():
        errors.append(f"no judge config with id {config_id}")
    if errors:
        raise FilterError("; ".join(errors))
    return found


class Facts:
    """Reads what the filters and risks test - a judgment of the config (None: any config), another config's
    verdict, the verifier, the final label - as conditions on Episode. Three readers, one set of rules:
    `Facts` uses uncorrelated subqueries (`id IN ...`: one hashed or indexed read however many episodes there are,
    and no join, so a queue can still be locked); `Facts(correlated=True)` uses EXISTS (cheap for a handful of known
    rows); `JoinedFacts` reads the joined row of a table query (`cj` = the config's judgment)."""

    def __init__(self, config_id: int | None = None, *, correlated: bool = False) -> None:
        self.config_id, self.correlated = config_id, correlated

    def _holds(self, rows: QuerySet) -> Q:
        """Episodes that have one of these rows (judgments, verifier results, final labels: each has episode_id)."""
        if self.correlated:
            return Q(Exists(rows.filter(episode_id=OuterRef("pk"))))
        return Q(pk__in=rows.values("episode_id"))

    def judged(self, **conditions) -> Q:
        rows = Judgment.objects.filter(**conditions)
        return self._holds(rows.filter(config_id=self.config_id) if self.config_id else rows)

    def judged_by_another(self, verdict: str) -> Q:
        rows = Judgment.objects.filter(verdict=verdict)
        if self.config_id:  # two ranges, not `<>`: read from the (config, verdict) index, not the whole table
            rows = rows.filter(Q(config_id__lt=self.config_id) | Q(config_id__gt=self.config_id))
        return self._holds(rows)

    def unjudged(self) -> Q:
        return ~self.judged()

    def verifier(self, ok: bool) -> Q:
        return self._holds(VerifierResult.objects.filter(ok=ok))

    def no_verifier(self) -> Q:
        return ~self._holds(VerifierResult.objects.all())

    def final(self, verdict: str) -> Q:
        return self._holds(FinalLabel.objects.filter(verdict=verdict))


class JoinedFacts(Facts):
    """The same facts read from a row that joins `cj` (the config's judgment), the verifier result and the final
    label (review/run_table.py): sorting and filtering one run's table then costs one pass over its rows."""

    def judged(self, **conditions) -> Q:
        return Q(**{f"cj__{name}": value for name, value in conditions.items()}) if conditions else Q(
            cj__id__isnull=False)

    def unjudged(self) -> Q:
        return Q(cj__id__isnull=True)

    def verifier(self, ok: bool) -> Q:
        return Q(verifier_result__ok=ok)

    def no_verifier(self) -> Q:
        return Q(verifier_result__isnull=True)

    def final(self, verdict: str) -> Q:
        return Q(final_label__verdict=verdict)


def judge_disagrees_with_verifier(facts: Facts) -> Q:
    """The judge says SUCCESS where the verifier failed, or NOT SUCCESS where it passed."""
    return (facts.judged(verdict=Judgment.Verdict.SUCCESS) & facts.verifier(False)) | (
        facts.judged(verdict=Judgment.Verdict.NOT_SUCCESS) & facts.verifier(True))


def _verdict_condition(verdicts: list[str], facts: Facts) -> Q:
    judged = [v for v in verdicts if v != "UNJUDGED"]
    parts = ([facts.judged(verdict__in=judged)] if judged else []) + ([facts.unjudged()] if "UNJUDGED" in verdicts
                                                                     else [])
    return reduce(or_, parts)


def _label_condition(state: str, facts: Facts) -> Q:
    labelled = Q(Exists(Label.objects.filter(episode_id=OuterRef("pk"))))  # NOT EXISTS, unlike NOT IN: an anti-join
    final_verdicts = {"final-success": LabelVerdict.SUCCESS, "final-not-success": LabelVerdict.NOT_SUCCESS,
                      "final-unsure": LabelVerdict.UNSURE}
    if state == "unlabelled":
        return ~labelled
    if state == "labelled":
        return labelled
    if state == "adjudicate":
        return needs_adjudication()
    return facts.final(final_verdicts[state])


def condition(f: EpisodeFilter, *, joined: bool = False) -> Q:
    """The filter as one condition on Episode; `joined` reads the row that review/run_table.py joins."""
    facts = JoinedFacts(f.config_id) if joined else Facts(f.config_id)
    cond = Q()
    if f.runs:
        cond &= Q(run_id__in=f.runs)
    if f.sites:
        cond &= Q(site__slug__in=f.sites)
    if f.task_kind:
        cond &= Q(task_kind=f.task_kind)
    if f.verdicts:
        cond &= _verdict_condition(f.verdicts, facts)
    if f.verifier:
        cond &= facts.no_verifier() if f.verifier == "none" else facts.verifier(f.verifier == "pass")
    if f.label_state:
        cond &= _label_condition(f.label_state, facts)
    if f.disagree:
        cond &= judge_disagrees_with_verifier(facts)
    if f.unsupported:
        cond &= facts.judged(unsupported_citations__gt=0)
    if f.search:
        cond &= Q(task__task_id__icontains=f.search) | Q(task__instruction__icontains=f.search)
    for tag in f.tags:
        # JSON text match: portable across SQLite and PostgreSQL, where `contains` on JSON is not.
        cond &= Q(pk__in=Label.objects.filter(tags__icontains=f'"{tag}"').values("episode_id"))
    return cond


def describe(f: EpisodeFilter) -> list[str]:
    """The filter in words, one phrase per part (empty: every episode)."""
    words = []
    if f.runs:
        names = dict(Run.objects.filter(pk__in=f.runs).values_list("pk", "name"))
        words.append("run " + ", ".join(names.get(r, f"#{r} (deleted)") for r in f.runs))
    if f.sites:
        words.append("site " + ", ".join(f.sites))
    if f.task_kind:
        words.append(f"{TASK_KINDS[f.task_kind]} tasks")
    if f.verdicts:
        words.append("judge said " + " or ".join(VERDICTS[v] for v in f.verdicts))
    if f.verifier:
        words.append(f"verifier {VERIFIER[f.verifier]}")
    if f.label_state:
        words.append(LABEL_STATES[f.label_state])
    if f.disagree:
        words.append("judge and verifier disagree")
    if f.unsupported:
        words.append("the judge cites evidence that is not there")
    if f.search:
        words.append(f"task id or instruction contains “{f.search}”")
    if f.tags:
        words.append("labels tagged " + ", ".join(f.tags))
    return words


def stored_filter(filters: dict | None, *, config_id: int | None = None) -> EpisodeFilter:
    """A queue's stored filter read back (values are not checked again: a deleted run simply matches nothing)."""
    data = filters or {}

    def known(key: str, choices: dict) -> str:
        return value if (value := str(data.get(key) or "")) in choices else ""

    return EpisodeFilter(
        runs=[int(r) for r in data.get("runs") or [] if str(r).isdigit()], sites=list(data.get("sites") or []),
        task_kind=known("task_kind", TASK_KINDS), verdicts=[v for v in data.get("verdicts") or [] if v in VERDICTS],
        verifier=known("verifier", VERIFIER), label_state=known("label_state", LABEL_STATES),
        disagree=bool(data.get("disagree")), unsupported=bool(data.get("unsupported")),
        search=str(data.get("search") or ""), tags=list(data.get("tags") or []), config_id=config_id)


def filter_form_choices(run: Run | None = None) -> dict:
    """What a filter form offers: the runs, the sites with episodes (in `run`, when given), the judge configs, and
    the fixed choices."""
    episodes = Episode.objects.filter(site=OuterRef("pk"))
    episodes = episodes.filter(run=run) if run else episodes
    return {"runs": Run.objects.only("id", "name").order_by("-created_at"),
            "sites": Site.objects.filter(Exists(episodes)).values_list("slug", flat=True),
            "configs": JudgeConfig.objects.order_by("provider", "model", "prompt_version"),
            "task_kinds": TASK_KINDS, "verdict_choices": VERDICTS, "verifier_choices": VERIFIER,
            "label_states": LABEL_STATES}
