"""The embedded broker writes each message whole: a worker listing the queue folder while a message is written never
finds it under a name it reads (kombu's own transport creates the file under its final name, then writes it; a
worker that moved it away in between read an empty message and its consumer died, seen in CI)."""
from __future__ import annotations

import os

from kombu import Connection
from kombu.transport import filesystem

from taskgen import broker_files


class _Watched:
    """A file whose every write first lists the queue folder: what a worker would see at that moment."""

    def __init__(self, real, folder: str, seen: list) -> None:
        self.real, self.folder, self.seen = real, folder, seen

    def write(self, data):
        self.seen.append([name for name in os.listdir(self.folder) if name.partition(".")[2] == "q.msg"])
        return self.real.write(data)

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()


def _readable_while_writing(module, transport, folder, monkeypatch) -> list:
    folder.mkdir()
    seen: list = []
    monkeypatch.setattr(module, "open", lambda *a, **k: _Watched(open(*a, **k), str(folder), seen), raising=False)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    with Connection(transport=transport, transport_options=options) as connection:
        queue = connection.SimpleQueue("q")
        queue.put({"unit": 1})
        message = queue.get(timeout=1)
        assert message.payload == {"unit": 1}
        message.ack()
        queue.close()
    return seen


def test_a_message_is_never_readable_before_it_is_whole(tmp_path, monkeypatch):
    seen = _readable_while_writing(broker_files, broker_files.Transport, tmp_path / "ours", monkeypatch)
    assert seen and all(names == [] for names in seen)
    # kombu's own: the message's final name is there, empty, while the message is written
    seen = _readable_while_writing(filesystem, filesystem.Transport, tmp_path / "kombu", monkeypatch)
    assert seen and any(names for names in seen)


def test_the_celery_app_sends_on_this_transport():
    from kombu.transport import resolve_transport

    import taskgen.celery  # noqa: F401 - importing the app is what names the transport

    assert resolve_transport("filesystem") is broker_files.Transport
