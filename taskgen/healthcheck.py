"""`python -m taskgen.healthcheck [URL]`: exit 0 when the web app answers a real page (the login page) with 200.

The compose file's healthcheck for `web`. It asks as the TLS proxy would (X-Forwarded-Proto: https), so the HTTPS
redirect of production settings does not answer instead of the page.
"""
from __future__ import annotations

import sys
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8000/accounts/login/"


def page_answers(url: str, timeout: float = 5.0) -> bool:
    """True when the page at `url` answers 200 and looks like the app's login page."""
    if not url.startswith(("http://", "https://")):
        return False
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https"})  # noqa: S310 (http(s) only)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return response.status == 200 and b'name="password"' in response.read()
    except (urllib.error.URLError, OSError):
        return False


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_URL
    ok = page_answers(target)
    print(f"{target}: {'ok' if ok else 'not answering'}")
    sys.exit(0 if ok else 1)
