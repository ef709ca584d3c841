"""A step is one action, the closing `done` included (taskgen/steps.py): recount the steps of stored episodes."""
from django.db import migrations


def recount(apps, schema_editor):
    Episode = apps.get_model("taskgen", "Episode")
    batch = []
    for episode in Episode.objects.only("id", "actions", "steps").iterator(chunk_size=2000):
        steps = len(episode.actions) if isinstance(episode.actions, list) else 0
        if steps != episode.steps:
            episode.steps = steps
            batch.append(episode)
        if len(batch) >= 2000:
            Episode.objects.bulk_update(batch, ["steps"])
            batch = []
    Episode.objects.bulk_update(batch, ["steps"])


class Migration(migrations.Migration):
    dependencies = [("taskgen", "0002_judge_rate_window")]
    operations = [migrations.RunPython(recount, migrations.RunPython.noop)]
