"""Finding the run and judge config a command line names, the same way in every subcommand."""
from __future__ import annotations

from pathlib import Path

from taskgen.models import JudgeConfig, Run


def run_find(text: str) -> Run | None:
    """A run by name, id, or the run dir it was imported from."""
    found = Run.objects.filter(name=text).first()
    if found is None and text.isdigit():
        found = Run.objects.filter(pk=int(text)).first()
    if found is None:
        candidates = {str(Path(text)), str(Path(text).resolve())}
        found = Run.objects.filter(source_dir__in=candidates).order_by("-created_at").first()
    return found


def judge_config_find(text: str) -> JudgeConfig | None:
    """A judge config by its id or its key (provider:model:prompt:images)."""
    if text.isdigit():
        return JudgeConfig.objects.filter(pk=int(text)).first()
    parts = text.split(":")
    if len(parts) != 4:
        return None
    provider, model, prompt_version, image_policy = parts
    return JudgeConfig.objects.filter(provider=provider, model=model, prompt_version=prompt_version,
                                      image_policy=image_policy).first()
