"""The machine's yardstick (bench/machine.py) that each benchmark round prints in its header: its figures are
measured (positive, in their units) and its line says them."""
from __future__ import annotations

from pathlib import Path

from bench import machine


def test_the_pure_python_workload_gives_its_quickest_and_slowest_time():
    quickest, slowest = machine.python_ms(samples=3, apart=0)
    assert 0 < quickest <= slowest


def test_fresh_memory_and_the_page_cache_are_measured_and_the_files_written_are_removed(tmp_path: Path):
    assert machine.fresh_memory_gb_s(8) > 0
    assert machine.page_cache_mb_s(files=20, kilobytes=4, where=tmp_path) > 0
    assert list(tmp_path.iterdir()) == []


def test_a_new_python_starts_django_and_the_sdk():
    assert 0 < machine.start_s(tries=1) < 60


def test_the_line_says_each_figure():
    line = machine.machine_line({"python_ms": 67.2, "python_slowest_ms": 118.4, "start_s": 1.012,
                                 "fresh_memory_gb_s": 1.56, "page_cache_mb_s": 1521})
    assert line.startswith("pure Python 67-118 ms CPU")
    assert "start 1.01 s" in line and "fresh memory 1.6 GB/s" in line and "1,521 MB/s" in line
