"""The blob store one folder level deep: MEDIA_ROOT/blobs/ab/<sha256>, where it was blobs/ab/cd/<sha256>.

Under two levels (65,536 folders) an import into a new store made a folder for nearly every blob it wrote, and a
folder costs the file system an inode as a file does: half of an import's file-system work was making folders. Under
one level a store has at most 256 folders, each holding 1/256 of the blobs (ext4 and XFS index large folders).

The blobs are renamed in place (the same file system: no byte is copied), each with the judge's downscaled copies
that live beside it (`<sha256>.<policy>.webp`: image_copy_path); a `.tmp-` file in an old folder (a write cut short)
is dropped. A move cut short (the process killed) finishes when the migration runs again: the
migration is recorded only once every blob is moved. Unapplying it moves them back. Nothing in the database changes:
a blob's place is computed from its hash (Blob.relative_path_of).
"""
import os
import re

from django.conf import settings
from django.db import migrations

# A blob (its content hash) or one of the judge's copies of it (taskgen/stages/judge/images.py: image_copy_path).
BLOB_OR_COPY = re.compile(r"[0-9a-f]{64}(\.[a-z0-9_]+\.webp)?")
HALF_WRITTEN = ".tmp-"


def _store() -> str:
    return os.path.join(str(settings.MEDIA_ROOT), "blobs")


def _first_level_folders(store: str) -> list[str]:
    if not os.path.isdir(store):
        return []
    with os.scandir(store) as entries:
        return [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]


def blobs_up_one_level(apps, schema_editor) -> None:
    """blobs/ab/cd/<sha256>[.<policy>.webp] -> blobs/ab/, each second-level folder removed once empty."""
    for folder in _first_level_folders(_store()):
        with os.scandir(folder) as entries:
            below = [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
        for old in below:
            with os.scandir(old) as entries:
                for entry in entries:
                    if entry.name.startswith(HALF_WRITTEN):
                        os.unlink(entry.path)
                    elif BLOB_OR_COPY.fullmatch(entry.name):
                        os.replace(entry.path, os.path.join(folder, entry.name))
            try:
                os.rmdir(old)
            except OSError:  # something not a blob is in it: left where it is
                pass


def blobs_down_one_level(apps, schema_editor) -> None:
    """blobs/ab/<sha256>[.<policy>.webp] -> blobs/ab/cd/ (the layout before this migration)."""
    for folder in _first_level_folders(_store()):
        with os.scandir(folder) as entries:
            files = [entry for entry in entries if entry.is_file(follow_symlinks=False)]
        made: set[str] = set()  # second-level folders made: one mkdir each, not one per blob
        for entry in files:
            if entry.name.startswith(HALF_WRITTEN):
                os.unlink(entry.path)
            elif BLOB_OR_COPY.fullmatch(entry.name):
                below = os.path.join(folder, entry.name[2:4])
                if below not in made:
                    os.makedirs(below, exist_ok=True)
                    made.add(below)
                os.replace(entry.path, os.path.join(below, entry.name))


class Migration(migrations.Migration):

    dependencies = [
        ("taskgen", "0028_judgment_request_first"),
    ]

    operations = [
        migrations.RunPython(blobs_up_one_level, blobs_down_one_level),
    ]
