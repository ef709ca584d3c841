"""On PostgreSQL, a trigger that sends NOTIFY taskgen_run_ended with a pipeline run's id when the run leaves
`running`, whatever ends it (its last unit settled, a cancel, an edit): a command waiting on the run in another
process hears it at once (taskgen/engine/run_ended.py) instead of reading the run's row ten times a second.
The notification goes out when the ending transaction commits, never for one rolled back."""

from django.db import migrations

_CREATE = ["""
CREATE OR REPLACE FUNCTION taskgen_run_ended_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('taskgen_run_ended', NEW.id::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql""", """
CREATE TRIGGER taskgen_run_ended AFTER UPDATE OF status ON taskgen_pipelinerun
FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status <> 'running')
EXECUTE FUNCTION taskgen_run_ended_notify()"""]
_DROP = ["DROP TRIGGER IF EXISTS taskgen_run_ended ON taskgen_pipelinerun",
         "DROP FUNCTION IF EXISTS taskgen_run_ended_notify()"]


def _create(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":  # SQLite's waits read the run's row instead
        for statement in _CREATE:
            schema_editor.execute(statement)


def _drop(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in _DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("taskgen", "0026_blob_screenshot_fewer_indexes"),
    ]

    operations = [migrations.RunPython(_create, _drop)]
