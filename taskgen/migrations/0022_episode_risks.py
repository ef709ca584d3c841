"""Each judgment's risks kept as bits beside validate's summary (taskgen/triage/risks_kept.py). An episode's
evidence is one of the things a risk reads ("no change"), so its columns now mark it too; every judged episode is
marked once, and the next refresh fills the bits."""

from django.db import migrations, models

_MOVED = """
DROP TRIGGER IF EXISTS review_validate_episode_moved ON taskgen_episode;
CREATE TRIGGER review_validate_episode_moved AFTER UPDATE OF {columns} ON taskgen_episode
    FOR EACH ROW WHEN (({old}) IS DISTINCT FROM ({new}))
    EXECUTE FUNCTION review_validate_mark_episode();
"""


def _trigger(columns: list[str]) -> str:
    return _MOVED.format(columns=", ".join(columns), old=", ".join(f"OLD.{c}" for c in columns),
                         new=", ".join(f"NEW.{c}" for c in columns))


_PLACE = ["run_id", "site_id", "task_kind"]
_FORWARD = _trigger([*_PLACE, "data_changes", "request_log"]) + """
INSERT INTO review_validatedirtyepisode (episode_id) SELECT DISTINCT episode_id FROM taskgen_judgment;
"""
_BACKWARD = _trigger(_PLACE)


def _on_postgresql(sql: str):
    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('taskgen', '0021_judgment_success_index'),
        ('review', '0011_labels_move_to_taskgen_state'),
    ]

    operations = [
        migrations.CreateModel(
            name='EpisodeRisks',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('episode_id', models.BigIntegerField()),
                ('run_id', models.BigIntegerField()),
                ('config_id', models.BigIntegerField()),
                ('verdict', models.CharField(max_length=12)),
                ('risks', models.SmallIntegerField()),
            ],
            options={
                'indexes': [models.Index(fields=['run_id', 'config_id', 'verdict'], include=('episode_id', 'risks'), name='episode_risks_run')],
                'constraints': [models.UniqueConstraint(fields=('episode_id', 'config_id'), name='episode_risks_unique')],
            },
        ),
        migrations.RunPython(_on_postgresql(_FORWARD), _on_postgresql(_BACKWARD)),
    ]
