"""solver/allocator.py: glibc's thresholds are set once, and the switch leaves them alone."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _run(env: dict[str, str]) -> str:
    code = "from ave_decl.solver.allocator import keep_freed_memory as k; print(k(), k())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="mallopt thresholds are glibc's")
def test_thresholds_are_set_once_per_process():
    assert _run({"AVE_MALLOC_TUNING": ""}) == "True True"


def test_the_switch_leaves_the_allocator_alone():
    assert _run({"AVE_MALLOC_TUNING": "off"}) == "False False"


def test_a_check_sets_them(monkeypatch):
    from ave_decl import check

    calls: list[int] = []
    monkeypatch.setattr("ave_decl.pipeline.keep_freed_memory", lambda: calls.append(1) or True)
    check(str(ROOT / "examples" / "gemm_naive.ave"), violation_sets=False)
    assert calls == [1]


def test_a_check_collects_rarely_and_restores_the_callers_thresholds(monkeypatch):
    import contextlib
    import gc

    from ave_decl import check
    from ave_decl.solver import allocator

    seen: list[tuple[int, int, int]] = []
    real = allocator.few_collections

    @contextlib.contextmanager
    def spying():
        with real():
            seen.append(gc.get_threshold())  # what the check runs under
            yield

    monkeypatch.setattr("ave_decl.pipeline.few_collections", spying)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        check(str(ROOT / "examples" / "gemm_naive.ave"), violation_sets=False)
        assert seen == [allocator.COLLECTOR_THRESHOLDS]
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(100_000, 10, 10)  # a caller's higher threshold is kept, not lowered
        with allocator.few_collections():
            assert gc.get_threshold() == (100_000, 20, 100)
        gc.set_threshold(0, 10, 10)  # automatic collection off stays off
        with allocator.few_collections():
            assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)
