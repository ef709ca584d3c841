"""Reading a judge's answer: verdict and parts from raw text (plain JSON or a fenced ```json block), and the
consistency check between a verdict and its own parts. Shared by the importer and the judge stage."""
from __future__ import annotations

from dataclasses import dataclass, field

from taskgen.citations import EvidenceIndex, unsupported_count
from taskgen.models import Episode, Screenshot
from taskgen.providers.answer_json import AnswerUnreadable, answer_json

VERDICTS = ("SUCCESS", "NOT SUCCESS")


@dataclass
class ParsedAnswer:
    """A judge answer read as data: verdict is "SUCCESS", "NOT SUCCESS" or "NONE" (no verdict)."""

    verdict: str = "NONE"
    parts: list[dict] = field(default_factory=list)
    error: str = ""

    @property
    def has_verdict(self) -> bool:
        return self.verdict in VERDICTS


def _load_object(text: str) -> dict | None:
    """The answer's JSON object (the one holding a verdict, where there are several), by the one rule of
    taskgen/providers/answer_json.py."""
    try:
        return answer_json(text, wanted=lambda value: "verdict" in value)
    except AnswerUnreadable:
        return None


def _clean_parts(raw) -> list[dict]:
    parts = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        done = item.get("done")
        parts.append({
            "part": str(item.get("part") or ""),
            "done": done is True or (isinstance(done, str) and done.strip().lower() in {"true", "yes"}),
            "evidence": str(item.get("evidence") or ""),
        })
    return parts


def parse_judge_response(text: str | None) -> ParsedAnswer:
    """Read a judge's raw answer; an answer that is not JSON or has no verdict comes back as verdict NONE."""
    if not text or not text.strip():
        return ParsedAnswer(error="empty answer")
    data = _load_object(text)
    if data is None:
        return ParsedAnswer(error="answer is not JSON")
    verdict = str(data.get("verdict") or "").strip().upper()
    parts = _clean_parts(data.get("parts"))
    if verdict not in VERDICTS:
        return ParsedAnswer(parts=parts, error="answer has no verdict")
    return ParsedAnswer(verdict=verdict, parts=parts)


def verdict_is_inconsistent(verdict: str, parts: list[dict]) -> bool:
    """SUCCESS with a part not done, or NOT SUCCESS with every part done, contradicts the judge's own parts."""
    if not parts or verdict not in VERDICTS:
        return False
    all_done = all(p.get("done") is True for p in parts)
    return (verdict == "SUCCESS" and not all_done) or (verdict == "NOT SUCCESS" and all_done)


def unsupported_citations_count(*, episode_id: int, parts: list[dict], episode: Episode | None = None,
                                step_files: dict[str, int] | None = None) -> int:
    """How many citations of these parts point at nothing in the episode (stored on the judgment for filters).
    A caller holding the episode (with its task) and its step files {lower-case name: step} saves two queries."""
    if not parts:
        return 0
    if episode is None:
        episode = Episode.objects.select_related("task").only(
            "request_log", "data_changes", "actions", "answer", "screen_text", "task__instruction").get(pk=episode_id)
    if step_files is None:
        names = Screenshot.objects.filter(episode_id=episode_id, kind=Screenshot.Kind.STEP).values_list("name", "step")
        step_files = {name.lower(): step for name, step in names}
    index = EvidenceIndex.for_episode(episode, step_files=step_files)
    return min(unsupported_count(parts, index), 32767)


def judgment_fields_of(text: str) -> dict:
    """A judge model's answer as a judgment's fields: its verdict and parts, the raw text, the parse error, and the
    flag for a verdict its own parts contradict (the same for single calls and Batch API answers)."""
    parsed = parse_judge_response(text)
    return {"verdict": parsed.verdict, "parts": parsed.parts, "raw_response": text, "error": parsed.error,
            "inconsistent": verdict_is_inconsistent(parsed.verdict, parsed.parts)}
