"""Which requests are noise: the one rule the judge's evidence and the reviewer's page share.

The judge is shown every request of an episode except these (the reference judge's own rule, kept as it is, case
and all); the episode page marks exactly these as noise, so a reviewer sees the requests the judge saw, no more and
no fewer. A request the judge saw (an `/admin/` page, a `.gif`, a `.JPG`) is never hidden from the reviewer.
"""
from __future__ import annotations

import re

REQUEST_NOISE = re.compile(r"^/(_admin|static|favicon)|\.(css|js|png|jpg|svg|ico|woff2?)$")


def is_request_noise(path: str) -> bool:
    """True for a request path the judge is not shown (static files, the sandbox's own admin, icons)."""
    return REQUEST_NOISE.search(path) is not None
