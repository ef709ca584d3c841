"""How many threads keep N model calls in flight: one rule for the judge worker's default threads (settings), the
database pool that must hold a connection for each, `taskgen judge --workers N` and the benchmarks. Plain arithmetic,
at the bottom of the house, so settings can ask it without importing a stage."""
from __future__ import annotations


def judge_threads_for(calls: int) -> int:
    """Threads that keep `calls` judge calls in flight: the calls plus a quarter of them (at least 2) preparing."""
    return calls + max(2, calls // 4)
