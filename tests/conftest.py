"""Shared helpers: run the real CLI in-process (click's runner) and locate example files."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ave_decl.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/engines is importable as `engines`
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).resolve().parent / "data"


class Result:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def ave():
    def run(*args: str) -> Result:
        runner = CliRunner()
        r = runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
        return Result(r.exit_code, r.stdout, r.stderr)

    return run


def pytest_report_header(config):
    from ave_decl.datalog.souffle_engine import find_souffle

    found = find_souffle()
    return f"engine differential tests compare against: {'live souffle at ' + found if found else 'golden outputs'}"
