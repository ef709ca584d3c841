"""The blob store's folders: a store written under two levels (blobs/ab/cd/<sha256>) is moved to one
(blobs/ab/<sha256>) by migration 0029, every blob byte for byte, and moved back when the migration is unapplied; a
write left half-done (a `.tmp-` file) is dropped, and a move cut short finishes when the migration runs again."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("taskgen", "0028_judgment_request_first")]
AFTER = [("taskgen", "0029_blobs_one_folder_level")]
AFTER_ALL = [("taskgen", "0030_judge_copies_beside_their_blobs")]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _contents(count: int) -> dict[str, bytes]:
    return {hashlib.sha256(data).hexdigest(): data for data in (f"screenshot {n}".encode() for n in range(count))}


def _write_two_levels(store: Path, contents: dict[str, bytes]) -> None:
    for sha256, data in contents.items():
        folder = store / sha256[:2] / sha256[2:4]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / sha256).write_bytes(data)


def _files(store: Path) -> dict[str, Path]:
    return {path.name: path.relative_to(store) for path in store.rglob("*") if path.is_file()}


def test_a_two_level_store_is_moved_to_one_level_and_back(settings):
    store = Path(settings.MEDIA_ROOT) / "blobs"
    contents = _contents(300)
    try:
        _migrate(BEFORE)
        _write_two_levels(store, contents)
        half_done = store / "ab" / "cd" / ".tmp-abcd-123-456"
        half_done.parent.mkdir(parents=True, exist_ok=True)
        half_done.write_bytes(b"half a write")
        _migrate(AFTER)
        assert _files(store) == {sha256: Path(sha256[:2]) / sha256 for sha256 in contents}
        assert all((store / sha256[:2] / sha256).read_bytes() == data for sha256, data in contents.items())
        assert all(path.parent == store for path in store.rglob("*") if path.is_dir())
        _migrate(BEFORE)
        assert _files(store) == {sha256: Path(sha256[:2]) / sha256[2:4] / sha256 for sha256 in contents}
    finally:
        _migrate(AFTER_ALL)


def test_a_move_cut_short_finishes_when_the_migration_runs_again(settings):
    """Some blobs already at their new place (a move killed halfway), the rest still two levels down: all end at
    their new place, none lost, and a blob in both places (written anew meanwhile) is kept once."""
    store = Path(settings.MEDIA_ROOT) / "blobs"
    contents = _contents(40)
    moved, left = dict(list(contents.items())[:25]), dict(list(contents.items())[15:])
    try:
        _migrate(BEFORE)
        for sha256, data in moved.items():
            (store / sha256[:2]).mkdir(parents=True, exist_ok=True)
            (store / sha256[:2] / sha256).write_bytes(data)
        _write_two_levels(store, left)
        _migrate(AFTER)
        assert _files(store) == {sha256: Path(sha256[:2]) / sha256 for sha256 in contents}
        assert all((store / sha256[:2] / sha256).read_bytes() == data for sha256, data in contents.items())
    finally:
        _migrate(AFTER_ALL)


def test_a_new_install_without_a_store_migrates(settings):
    assert not (Path(settings.MEDIA_ROOT) / "blobs").exists()
    try:
        _migrate(BEFORE)
        _migrate(AFTER_ALL)
    finally:
        _migrate(AFTER_ALL)
    assert not (Path(settings.MEDIA_ROOT) / "blobs").exists()


def test_the_judges_copies_move_with_their_blobs_both_ways(settings):
    """A stored screenshot's downscaled copies (`<sha256>.small.webp`, made at import for the judge) live beside its
    blob: they move with it, so the judge reads them where it looks (image_copy_path) instead of decoding every
    screenshot again, and no second-level folder is left holding them."""
    from taskgen.stages.judge.images import POLICIES, image_copy_path

    store = Path(settings.MEDIA_ROOT) / "blobs"
    contents = _contents(30)
    try:
        _migrate(BEFORE)
        _write_two_levels(store, contents)
        for sha256 in contents:
            (store / sha256[:2] / sha256[2:4] / f"{sha256}.small.webp").write_bytes(b"copy of " + sha256.encode())
        _migrate(AFTER)
        for sha256 in contents:
            assert image_copy_path(sha256, POLICIES["small"]).read_bytes() == b"copy of " + sha256.encode()
        assert all(path.parent == store for path in store.rglob("*") if path.is_dir())
        _migrate(BEFORE)
        assert {name: path for name, path in _files(store).items() if name.endswith(".webp")} == {
            f"{sha256}.small.webp": Path(sha256[:2]) / sha256[2:4] / f"{sha256}.small.webp" for sha256 in contents}
    finally:
        _migrate(AFTER_ALL)


def test_copies_an_earlier_0029_left_two_levels_down_are_moved_to_their_blobs(settings):
    """0029 as first written moved the blobs and left their copies in the old folders: 0030 moves those up."""
    from taskgen.stages.judge.images import POLICIES, image_copy_path

    store = Path(settings.MEDIA_ROOT) / "blobs"
    contents = _contents(20)
    try:
        _migrate(AFTER)
        for sha256, data in contents.items():
            (store / sha256[:2]).mkdir(parents=True, exist_ok=True)
            (store / sha256[:2] / sha256).write_bytes(data)
            (store / sha256[:2] / sha256[2:4]).mkdir(exist_ok=True)
            (store / sha256[:2] / sha256[2:4] / f"{sha256}.small.webp").write_bytes(b"copy")
        _migrate(AFTER_ALL)
        assert all(image_copy_path(sha256, POLICIES["small"]).read_bytes() == b"copy" for sha256 in contents)
        assert all(path.parent == store for path in store.rglob("*") if path.is_dir())
    finally:
        _migrate(AFTER_ALL)
