"""Two indexes no query reads, which every import's COPY kept up: the varchar_pattern_ops (LIKE) index that
unique=True builds for Blob.sha256 on PostgreSQL (its uniqueness moves to a Meta constraint, added before the old
one goes, so it is enforced throughout), and Screenshot.episode_id's own index, which the unique
(episode, kind, name) and the (episode, kind, step) index both cover by leading with it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("taskgen", "0025_run_episodes"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="blob",
            constraint=models.UniqueConstraint(fields=("sha256",), name="blob_unique_sha256"),
        ),
        migrations.AlterField(
            model_name="blob",
            name="sha256",
            field=models.CharField(max_length=64),
        ),
        migrations.AlterField(
            model_name="screenshot",
            name="episode",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="screenshots",
                to="taskgen.episode",
            ),
        ),
    ]
