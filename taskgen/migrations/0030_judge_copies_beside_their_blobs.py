"""The judge's downscaled copies of the stored screenshots (`<sha256>.<policy>.webp`) beside their blobs again.

They live beside the blob (taskgen/stages/judge/images.py: image_copy_path). Migration 0029 as first written moved
the blobs up a folder level and left their copies in the old second-level folders, where nothing reads them: the
judge then decoded every screenshot again to remake them (29 ms of CPU each), and the old folders stayed. This moves
each copy left there up beside its blob (0029's own move, which now takes the copies along) and removes the folders
once empty. A store migrated by 0029 as it is now has none left: nothing to do. Unapplied: nothing (0029's way back
takes the copies down with their blobs).
"""
import importlib

from django.db import migrations

one_folder_level = importlib.import_module("taskgen.migrations.0029_blobs_one_folder_level")


class Migration(migrations.Migration):

    dependencies = [
        ("taskgen", "0029_blobs_one_folder_level"),
    ]

    operations = [
        migrations.RunPython(one_folder_level.blobs_up_one_level, migrations.RunPython.noop),
    ]
