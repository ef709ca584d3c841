from django.db import migrations


def recount_unsupported(apps, schema_editor):
    """Count the stored judgments' unsupported citations again under taskgen/citations.py's rules as they are now (a
    collection no data change touched is unsupported; each place is cited once)."""
    from taskgen.citations import EvidenceIndex, unsupported_count

    Judgment = apps.get_model("taskgen", "Judgment")
    Screenshot = apps.get_model("taskgen", "Screenshot")
    judged = (Judgment.objects.exclude(parts=[]).select_related("episode", "episode__task").order_by("pk")
              .only("id", "parts", "unsupported_citations", "episode__request_log", "episode__data_changes",
                    "episode__actions", "episode__answer", "episode__screen_text", "episode__task__instruction"))
    chunk: list = []
    for judgment in judged.iterator(chunk_size=500):
        chunk.append(judgment)
        if len(chunk) == 500:
            _recount(chunk, Judgment, Screenshot, EvidenceIndex, unsupported_count)
            chunk = []
    _recount(chunk, Judgment, Screenshot, EvidenceIndex, unsupported_count)


def _recount(chunk, Judgment, Screenshot, EvidenceIndex, unsupported_count) -> None:
    step_files: dict[int, dict[str, int]] = {}
    for episode_id, name, step in Screenshot.objects.filter(
            episode_id__in={j.episode_id for j in chunk}, kind="step").values_list("episode_id", "name", "step"):
        step_files.setdefault(episode_id, {})[name.lower()] = step
    changed = []
    for judgment in chunk:
        episode = judgment.episode
        index = EvidenceIndex.from_fields(request_log=episode.request_log, data_changes=episode.data_changes,
                                          actions=episode.actions, answer=episode.answer,
                                          screen_text=episode.screen_text, instruction=episode.task.instruction,
                                          step_files=step_files.get(episode.pk, {}))
        count = min(unsupported_count(judgment.parts, index), 32767)
        if count != judgment.unsupported_citations:
            judgment.unsupported_citations = count
            changed.append(judgment)
    Judgment.objects.bulk_update(changed, ["unsupported_citations"], batch_size=500)


class Migration(migrations.Migration):

    dependencies = [
        ("taskgen", "0012_judge_answer_kept"),
    ]

    operations = [
        migrations.RunPython(recount_unsupported, migrations.RunPython.noop),
    ]
