"""The kept export order's ids uncompressed (PostgreSQL's EXTERNAL storage): a certificate reads the 8 MB of a
million-episode run's order on every call, and decompressing it cost the server about half of that read. Rows kept
before are rewritten as they are next computed."""
from django.db import migrations


def _storage(kind: str):
    def apply(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE taskgen_exportorder ALTER COLUMN episode_ids SET STORAGE {kind}")
    return apply


class Migration(migrations.Migration):
    dependencies = [("taskgen", "0023_risk_dirty_episodes")]
    operations = [migrations.RunPython(_storage("EXTERNAL"), _storage("EXTENDED"))]
