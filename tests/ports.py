"""A TCP port on 127.0.0.1 that nothing listens on now (the kernel's choice): a server a test starts binds it, or a
client pointed at it is refused (a model server that is down)."""
from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
