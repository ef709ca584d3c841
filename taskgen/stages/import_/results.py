"""What sits beside the episodes of a run dir: verifier results (results_regraded.jsonl over results.jsonl) and an
existing reference judge folder (`<RUN_DIR>_judge/<task_id>.json`), each saved only when new or changed."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from taskgen.judging import parse_judge_response, unsupported_citations_count, verdict_is_inconsistent
from taskgen.models import JudgeConfig, Judgment, VerifierResult
from taskgen.stages.import_.files import (
    FileSkipped,
    Skip,
    check_plain_name,
    decode_text,
    jsonl_lines,
    parse_json,
    read_bytes,
    read_json_object,
    without_nul,
)

RESULT_FILES = ("results_regraded.jsonl", "results.jsonl")  # the first that exists wins, as in the reference
REFERENCE_JUDGE = {"provider": "gemini", "prompt_version": "reference", "image_policy": "reference"}


@dataclass
class Saved:
    written: int = 0
    unchanged: int = 0
    skips: list[Skip] = field(default_factory=list)


def _result_lines(text: str, shown: str, saved: Saved) -> dict[str, bool]:
    results = {}
    for number, raw in jsonl_lines(text):
        try:
            data = parse_json(raw)
            if not isinstance(data, dict) or not isinstance(data.get("ok"), bool | int):
                raise FileSkipped("is not an object with task_id and ok")
            results[check_plain_name(data.get("task_id"))] = bool(data["ok"])
        except FileSkipped as exc:
            saved.skips.append(Skip(f"{shown}:{number}", str(exc)))
    return results


def verifier_results_import(*, run_dir: Path, root: Path, shown: str, episode_ids: dict[str, int],
                            source: str | None) -> Saved:
    """VerifierResult rows from the run's results file, one per episode; lines for unknown tasks are skipped."""
    saved = Saved()
    path = next((run_dir / name for name in RESULT_FILES if (run_dir / name).exists()), None)
    if path is None:
        return saved
    try:
        text = decode_text(read_bytes(path, root=root, limit=settings.JSON_MAX_BYTES))
    except FileSkipped as exc:
        saved.skips.append(Skip(f"{shown}/{path.name}", str(exc)))
        return saved
    results = _result_lines(text, f"{shown}/{path.name}", saved)
    source = source or path.name
    existing = {v.episode_id: v for v in VerifierResult.objects.filter(episode_id__in=episode_ids.values())}
    for task_id, ok in results.items():
        if task_id not in episode_ids:
            saved.skips.append(Skip(f"{shown}/{path.name}", f"task {task_id}: no episode in this run"))
            continue
        _verifier_result_save(episode_id=episode_ids[task_id], ok=ok, source=source,
                              existing=existing.get(episode_ids[task_id]), saved=saved)
    return saved


def _verifier_result_save(*, episode_id: int, ok: bool, source: str, existing: VerifierResult | None,
                          saved: Saved) -> None:
    if existing is not None and existing.ok == ok and existing.source == source:
        saved.unchanged += 1
        return
    VerifierResult.objects.update_or_create(episode_id=episode_id, defaults={"ok": ok, "source": source})
    saved.written += 1


def judge_dir_of(run_dir: Path) -> Path:
    return run_dir.parent / f"{run_dir.name}_judge"


def judgments_import(*, run_dir: Path, shown: str, episode_ids: dict[str, int]) -> Saved:
    """Judgment rows from `<RUN_DIR>_judge/<task_id>.json`, under the reference judge's config for the file's model."""
    saved = Saved()
    judge_dir = judge_dir_of(run_dir)
    if not judge_dir.is_dir():
        return saved
    root = judge_dir.resolve()
    existing = {(j.episode_id, j.config_id): j for j in Judgment.objects.filter(episode_id__in=episode_ids.values())}
    for path in sorted(judge_dir.glob("*.json")):
        file_shown = f"{shown}_judge/{path.name}"
        try:
            episode_id, record = _judge_record(path, root, episode_ids)
            _judgment_save(episode_id=episode_id, record=record, existing=existing, saved=saved)
        except FileSkipped as exc:
            saved.skips.append(Skip(file_shown, str(exc)))
    return saved


def _judge_record(path: Path, root: Path, episode_ids: dict[str, int]) -> tuple[int, dict]:
    task_id = check_plain_name(path.stem)
    record = without_nul(read_json_object(path, root=root))
    if record.get("task_id", task_id) != task_id:
        raise FileSkipped(f"names task {str(record.get('task_id'))[:80]!r}, not {task_id}")
    if task_id not in episode_ids:
        raise FileSkipped(f"task {task_id}: no episode in this run")
    response = record.get("response")
    if response is not None and not isinstance(response, str):
        raise FileSkipped("`response` is not text")
    return episode_ids[task_id], record


def _verdict_of_record(record: dict, parsed) -> str:
    """The file's `predicted_label` is its verdict, as the reference's validate and rows read it (1: SUCCESS, 0: NOT
    SUCCESS); a file without one falls back to the verdict in its response."""
    label = record.get("predicted_label")
    if label is None:
        return parsed.verdict
    if isinstance(label, bool) or label not in (0, 1):
        raise FileSkipped(f"predicted_label is {str(label)[:40]!r}, not 0 or 1")
    return Judgment.Verdict.SUCCESS if label == 1 else Judgment.Verdict.NOT_SUCCESS


def _judgment_save(*, episode_id: int, record: dict, existing: dict, saved: Saved) -> None:
    model = str(record.get("model") or "unknown")[:200]
    config, _ = JudgeConfig.objects.get_or_create(model=model, **REFERENCE_JUDGE)
    response = record.get("response") or ""
    parsed = parse_judge_response(response)
    verdict = _verdict_of_record(record, parsed)
    current = existing.get((episode_id, config.pk))
    if current is not None and (current.raw_response, current.verdict) == (response, verdict):
        saved.unchanged += 1
        return
    # the response's parts stay as evidence; a response whose own verdict disagrees with the label is flagged
    disagrees = parsed.has_verdict and parsed.verdict != verdict
    error = "" if verdict != Judgment.Verdict.NONE else parsed.error
    with transaction.atomic():
        Judgment.objects.update_or_create(episode_id=episode_id, config=config, defaults={
            "verdict": verdict, "parts": parsed.parts, "raw_response": response, "error": error,
            "inconsistent": verdict_is_inconsistent(verdict, parsed.parts), "source": "import",
            "response_disagrees": disagrees,
            "unsupported_citations": unsupported_citations_count(episode_id=episode_id, parts=parsed.parts),
        })
    saved.written += 1
