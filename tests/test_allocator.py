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
