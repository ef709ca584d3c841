"""Forms to start each pipeline stage from the runs page; `params()` gives JSON-able values for the stage start."""
from __future__ import annotations

from django import forms
from django.conf import settings

from taskgen.harness.agents import (
    RULES,
    AgentError,
    agent_choices,
    agent_options_check,
    agent_options_from,
    agent_reach_lines,
)
from taskgen.models import Export, JudgeConfig, Run, Site
from taskgen.names import PLAIN_NAME_MAX, PLAIN_NAME_RULE
from taskgen.providers import provider_can, provider_choices, provider_info, provider_names, provider_offline
from taskgen.stages.export.select import (
    ExportError,
    Selection,
    export_include_check,
    export_judge_config_default,
    export_select,
)
from taskgen.stages.judge.images import POLICIES
from taskgen.stages.judge.prompt import judge_prompt
from taskgen.triage.risk import RISK_NAMES, RISK_WORDS

PATH_HELP = "A path under the data root ({root}); relative paths start there."


def _path_field(label: str, required: bool = True, help_text: str = "") -> forms.CharField:
    return forms.CharField(label=label, required=required, max_length=1000,
                           help_text=help_text or PATH_HELP.format(root=settings.DATA_ROOT))


class StageForm(forms.Form):
    stage = ""
    title = ""
    explain = ""

    def params(self) -> dict:
        values = {}
        for name, value in self.cleaned_data.items():
            if isinstance(value, Run | JudgeConfig):
                value = value.pk
            elif hasattr(value, "values_list"):
                value = list(value.values_list("pk", flat=True))
            values[name] = value
        return values


class ProposeForm(StageForm):
    stage, title = "propose", "Propose tasks for sites"
    explain = ("Writes tasks for each site from its pages, controls and text; they wait on the Tasks page for a "
               "human to approve them. Sites that have their tasks already are skipped.")
    sites = forms.ModelMultipleChoiceField(queryset=Site.objects.exclude(sitemap={}).order_by("slug"),
                                           to_field_name="slug", required=False,
                                           help_text="None chosen: every site with a sitemap.")
    per_site = forms.IntegerField(label="Tasks per site", min_value=1, max_value=5000, initial=140)
    batch = forms.IntegerField(label="Tasks per proposer call", min_value=1, max_value=100, initial=20)
    provider = forms.ChoiceField(label="Proposer", choices=lambda: provider_choices("propose"),
                                 initial=lambda: provider_offline("propose"),
                                 help_text="rules is an offline baseline from the site's own pages, not a model.")
    model = forms.CharField(max_length=200, required=False, help_text="Empty: the provider's default model.")
    seed = forms.IntegerField(initial=0)
    out = _path_field("Also write a tasks.jsonl", required=False)

    def params(self) -> dict:
        return {**super().params(), "sites": [site.slug for site in self.cleaned_data["sites"]]}


class ImportForm(StageForm):
    stage, title = "import", "Import a run dir"
    explain = "Reads <run>/<task_id>/grade_inputs.json, screenshots and rows, and <run>_judge verdicts if present."
    run_dir = _path_field("Run dir")
    tasks_file = _path_field("Tasks file (tasks.jsonl)", required=False,
                             help_text="Optional: by default the importer looks beside the run dir.")
    name = forms.CharField(label="Run name", required=False, max_length=200)


class AttemptForm(StageForm):
    stage, title = "attempt", "Attempt tasks in the browser harness"
    explain = "Runs an agent on each task of a tasks file and records every episode."
    tasks_file = _path_field("Tasks file (tasks.jsonl)")
    agent = forms.ChoiceField(choices=agent_choices, initial="scripted")
    name = forms.CharField(label="Run name", max_length=PLAIN_NAME_MAX,
                           help_text=f"A new plain name: {PLAIN_NAME_RULE}.")
    mistakes = forms.FloatField(label="Mistake rate (scripted agent)", min_value=0, max_value=1, initial=0.3)
    seed = forms.IntegerField(initial=0)
    limit = forms.IntegerField(label="At most this many tasks", required=False, min_value=1)
    model = forms.CharField(label="Model (model agents)", max_length=200, required=False,
                            help_text="Empty: TASKGEN_AGENT_MODEL, else the provider's default model.")
    # A CharField: a server on the compose network ("http://vllm:8000/v1") has no dot, which URLField refuses.
    base_url = forms.CharField(label="Server URL", required=False, max_length=500,
                              help_text="e.g. http://127.0.0.1:8001/v1 for vLLM; empty: OPENAI_BASE_URL. "
                                        "The key comes only from OPENAI_API_KEY.")
    images = forms.ChoiceField(label="Screenshots (model agents)", required=False, initial="",
                               choices=[("", "as the setting says (TASKGEN_OPENAI_IMAGES)"),
                                        ("yes", "send them (the model takes images)"),
                                        ("no", "text only (the model takes no images)")])

    arm = forms.CharField(label="Arm (external harness)", max_length=PLAIN_NAME_MAX, required=False, initial="base",
                          help_text="Passed to the harness command as {arm}.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.agent_reach = agent_reach_lines()  # which agents can attempt which tasks, said beside the field
        agents = [provider_info(name) for name in provider_names("agent")]  # what the provider table says
        self.fields["agent"].help_text = "A model agent needs its provider's setting: " + ", ".join(
            f"{p.name} {p.needs}" + (" (or the URL below)" if "server_url" in p.can else "") for p in agents) + "."
        self.fields["base_url"].label = f"Server URL ({', '.join(provider_names('server_url'))})"

    def clean(self) -> dict:
        data = super().clean()
        if data.get("agent"):
            try:
                agent_options_check(name=data["agent"], options=self.agent_options())
            except AgentError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return data

    def agent_options(self) -> dict:
        """A model agent's options from the form's fields (none for the scripted agent)."""
        return agent_options_from(self.cleaned_data)

    def params(self) -> dict:
        values = {k: v for k, v in super().params().items() if k not in ("model", "base_url", "images", "arm")}
        return {**values, "agent_options": self.agent_options()}


class AttemptApprovedForm(AttemptForm):
    stage, title = "attempt-approved", "Attempt the approved tasks"
    explain = ("Writes the approved tasks of the chosen sites as a tasks.jsonl under the data root and attempts "
               "exactly those. Proposed tasks have no known solution, so the scripted agent cannot attempt them: "
               "the rules baseline (offline, not a model) and the model agents can.")
    sites = forms.ModelMultipleChoiceField(queryset=Site.objects.order_by("slug"), to_field_name="slug")
    include_all = forms.BooleanField(required=False, label="All tasks not dropped",
                                     help_text="Also the tasks nobody has approved yet.")
    field_order = ["sites", "include_all", "agent", "name", "mistakes", "seed", "limit", "model", "base_url",
                   "images", "arm"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["tasks_file"]
        self.fields["agent"].initial = RULES  # approved tasks are mostly proposed ones: scripted can do none

    def params(self) -> dict:
        return {**super().params(), "sites": [site.slug for site in self.cleaned_data["sites"]]}


def _prompt_versions() -> list[tuple[str, str]]:
    version = judge_prompt().version
    return [(version, version)]


class JudgeForm(StageForm):
    stage, title = "judge", "Judge a run"
    explain = "Judges every episode of the run not yet judged with this config (provider, model, prompt, images)."
    run = forms.ModelChoiceField(queryset=Run.objects.order_by("-created_at"))
    provider = forms.ChoiceField(choices=lambda: provider_choices("judge"), initial=settings.JUDGE_PROVIDER)
    model = forms.CharField(max_length=200, required=False)
    prompt_version = forms.ChoiceField(choices=_prompt_versions, label="Prompt version",
                                       help_text="The prompt file in use (TASKGEN_JUDGE_PROMPT_FILE).")
    image_policy = forms.ChoiceField(
        choices=[("", "the provider's default"), *((name, name) for name in POLICIES)], required=False)
    batch = forms.BooleanField(required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["provider"].initial = settings.JUDGE_PROVIDER  # read now: tests and deployments set it late
        for name, help_text in judge_form_help().items():  # what the provider table says, read as the form is made
            self.fields[name].help_text = help_text
        if not provider_names("batch"):  # no provider here has a batch API: nothing to offer
            del self.fields["batch"]

    def clean(self) -> dict:
        data = super().clean()
        if provider_can(data.get("provider") or "", "offline"):
            data["model"] = ""  # the baseline has one model; a name typed here would only mislead the stored params
        return data


def judge_form_help() -> dict[str, str]:
    """The judge form's help for its provider, model, image and batch fields, from the provider table."""
    judges = [provider_info(name) for name in provider_names("judge")]
    needs = [f"{p.name} needs {p.needs}" for p in judges if p.needs]
    offline = [f"{p.name} is an offline baseline (one model, no images)" for p in judges if "offline" in p.can]
    models = [f"TASKGEN_{p.model_setting} for {p.name}" for p in judges if p.model_setting]
    own = " and ".join(p.name for p in judges if "media_resolution" in p.can) or "none"
    return {
        "provider": "; ".join(needs + offline) + ".",
        "model": f"Empty: the provider's default ({', '.join(models)}).",
        "image_policy": f"Empty: {settings.JUDGE_IMAGE_POLICY} for {own}, small for the others. medium / low: the "
                        "model's own media resolution (256 / 64 tokens an image); small / default: a 768 / 1,024-px "
                        "copy; full: as stored.",
        "batch": f"Use the provider's batch API (cheaper, slower): {', '.join(provider_names('batch'))}.",
    }


class ValidateForm(StageForm):
    stage, title = "validate", "Validate a judge"
    explain = "Measures a judge config against the task verifiers or the final human labels."
    runs = forms.ModelMultipleChoiceField(queryset=Run.objects.order_by("-created_at"))
    config = forms.ModelChoiceField(queryset=JudgeConfig.objects.order_by("provider", "model"), label="Judge config")
    against = forms.ChoiceField(choices=[("verifier", "task verifiers"), ("human", "final human labels")])


class ExportForm(StageForm):
    stage, title = "export", "Export approved rows"
    explain = ("Sites round robin, tasks in file order, whole episodes up to the step budget. Leave the folder empty "
               "for a download only; with a folder, the rows are written there in the background.")
    run = forms.ModelChoiceField(queryset=Run.objects.order_by("-created_at"))
    source = forms.ChoiceField(choices=Export.Selection.choices, initial=Export.Selection.JUDGE)
    judge_config = forms.ModelChoiceField(queryset=JudgeConfig.objects.order_by("provider", "model"), required=False,
                                          empty_label="the run's own (when one judge config judged it)",
                                          help_text="Whose verdicts count (not needed for final human labels).")
    budget = forms.IntegerField(min_value=1, initial=settings.EXPORT_BUDGET,
                                help_text="Steps (rows); the last episode may pass it, as in the reference.")
    include_reviewer_rejected = forms.BooleanField(
        required=False, label="Also export judge successes reviewers labelled Not success",
        help_text="Left out unless ticked (judge successes only; an adjudicated Not success is never exported).")
    include_verifier_failed = forms.BooleanField(required=False, label="Also export episodes the verifier failed",
                                                 help_text="Left out unless ticked.")
    exclude_risk = forms.MultipleChoiceField(
        required=False, label="Leave out episodes holding", widget=forms.CheckboxSelectMultiple,
        choices=[(name, RISK_WORDS[name]) for name in RISK_NAMES],
        help_text="The riskiest strata of the judge's successes (the certificate's cuts table shows what each costs).")
    certify = forms.FloatField(
        required=False, min_value=0.01, max_value=0.99, label="Certified at least",
        help_text="Write nothing unless the 95% lower bound on the precision of exactly these episodes reaches this "
                  "(e.g. 0.9); the certificate goes into the manifest. Empty: no gate.")
    out_dir = _path_field("Folder to write", required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        configs = list(self.fields["judge_config"].queryset[:2])
        if len(configs) == 1:  # the only judge config is the one meant: no need to make the admin pick it
            self.fields["judge_config"].initial = configs[0].pk

    def clean(self) -> dict:
        data = super().clean()
        try:
            export_include_check(source=data.get("source", ""),
                                 include_reviewer_rejected=bool(data.get("include_reviewer_rejected")))
        except ExportError as exc:
            self.add_error("include_reviewer_rejected", str(exc))
        if data.get("run") and not data.get("judge_config") and data.get("source") != Export.Selection.HUMAN:
            try:  # the run's only judge config, whatever other runs were judged by
                data["judge_config"] = export_judge_config_default(run=data["run"])
            except ExportError as exc:
                self.add_error("judge_config", str(exc))
        return data

    def selection(self) -> Selection:
        """What this export would write and leave out (the form is valid): the stage's own selection."""
        data = self.cleaned_data
        return export_select(run=data["run"], source=data["source"], judge_config=data["judge_config"],
                             budget=data["budget"], include_reviewer_rejected=data["include_reviewer_rejected"],
                             include_verifier_failed=data["include_verifier_failed"],
                             exclude_risk=data.get("exclude_risk") or ())


STAGE_FORMS: dict[str, type[StageForm]] = {
    form.stage: form for form in (ImportForm, ProposeForm, AttemptForm, AttemptApprovedForm, JudgeForm, ValidateForm,
                                  ExportForm)
}
