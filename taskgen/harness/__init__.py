"""The browser harness: Playwright driving Chromium through episodes on the sandbox sites (see episode.py)."""
