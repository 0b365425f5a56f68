"""A git revision of this repository, extracted beside it for a same-machine comparison.

Benchmarks that compare "this tree" with an earlier revision run fresh processes of both trees
in alternation (bench/check.py --against, bench/simulate.py --against), so a busy machine slows
both sides alike; this module only provides the second tree.
"""
from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def revision_tree(rev: str) -> Iterator[Path]:
    """`rev` checked out (detached `git worktree`) in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                       capture_output=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
