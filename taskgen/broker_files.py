"""The embedded broker (`filesystem://`, the default without Redis) with its messages written whole.

kombu's filesystem transport creates a message's file under its final name and then writes it; a worker listing the
folder in between moves the empty file away and reads nothing, and its consumer dies on the JSON error (seen in CI:
a propose run's Celery worker stopped, the run never finished). Here a message is written under a name no reader
takes (`.partial-...`) and renamed to its final name once written (a rename within a folder is atomic), so a
reader sees a message whole or not at all. `taskgen/celery.py` makes this the transport `filesystem://` names.
"""
from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

ALIAS = "taskgen.broker_files:Transport"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs) -> None:
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"  # kombu's own name: readers sort by it
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".partial-{name}")  # not "<anything>.<queue>.msg": never read
        try:
            with open(partial, "wb", buffering=0) as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def broker_files_use() -> None:
    """`filesystem://` names this transport in every process that imports the Celery app."""
    from kombu.transport import TRANSPORT_ALIASES, _transport_cache

    TRANSPORT_ALIASES["filesystem"] = ALIAS
    _transport_cache.pop("filesystem", None)
