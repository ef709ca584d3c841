"""Marks of the episodes whose kept risks are to be re-read (taskgen/triage/risks_kept.py: risks_refresh)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('taskgen', '0022_episode_risks'),
    ]

    operations = [
        migrations.CreateModel(
            name='RiskDirtyEpisode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('episode_id', models.BigIntegerField()),
            ],
            options={
                'indexes': [models.Index(fields=['episode_id'], name='risk_dirty_episode')],
            },
        ),
    ]
