"""`taskgen demo-serve`: the web server and a Celery worker for `make demo`, with the login in the final banner;
Ctrl-C stops both within 10 seconds (taskgen/demo.py)."""
from __future__ import annotations

import argparse
import signal
import threading

from taskgen.demo import demo_login_words, servers_start, servers_stop, wait_until_serving

NAME = "demo-serve"
HELP = "Start the web server and the Celery workers together (output in var/logs/); Ctrl-C stops them within 10 s."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes of the default and browser queues")


def _banner(url: str, servers) -> str:
    logs = ", ".join(str(s.log) for s in servers)
    return (f"\n  Taskgen Review is running: {url}\n  {demo_login_words()}\n"
            f"  Ctrl-C stops the web server and the workers.   (their output: {logs})\n")


def run(options: dict, stdout, stderr) -> int:
    url = f"http://{options['host']}:{options['port']}/"
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    servers = servers_start(host=options["host"], port=options["port"], concurrency=options["concurrency"])
    try:
        if not wait_until_serving(url, servers):
            stderr.write(f"demo: a server did not start; see {', '.join(str(s.log) for s in servers)}")
            return 1
        stdout.write(_banner(url, servers))
        stdout.flush()
        while not stop.is_set() and all(s.process.poll() is None for s in servers):
            stop.wait(0.5)
    finally:
        seconds = servers_stop(servers)
    stdout.write(f"demo: stopped the web server and the workers in {seconds:.1f} s")
    return 0
