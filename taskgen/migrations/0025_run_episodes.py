"""Each run's episodes as validate's summary counts them (taskgen.models.RunEpisodes), filled from the episodes the
summary has summed so far; the refresh moves it from then on, with the marks still waiting."""

from django.db import migrations, models

_FILL = """
SELECT pg_advisory_xact_lock(7318412);
INSERT INTO taskgen_runepisodes (run_id, episodes, id_sum, id_square_sum)
SELECT run_id, count(*), sum(episode_id), sum(episode_id::numeric * episode_id)
FROM review_validateepisodecell WHERE config_a = 0 GROUP BY run_id;
"""


def _fill(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":  # the summary is kept on PostgreSQL only
        schema_editor.execute(_FILL)


class Migration(migrations.Migration):

    dependencies = [
        ('taskgen', '0024_export_order_uncompressed'),
        ('review', '0011_labels_move_to_taskgen_state'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunEpisodes',
            fields=[
                ('run_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('episodes', models.BigIntegerField()),
                ('id_sum', models.DecimalField(decimal_places=0, max_digits=40)),
                ('id_square_sum', models.DecimalField(decimal_places=0, max_digits=60)),
            ],
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
    ]
