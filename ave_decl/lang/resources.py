"""Where the grammar and the rule files live: the checkout (editable install) or the installed share dir."""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

_SHARE = Path("share") / "ave-decl"


@lru_cache(maxsize=None)
def data_root() -> Path:
    """The folder holding `grammar/` and `rules/`."""
    checkout = Path(__file__).resolve().parents[2]  # ave_decl/lang/resources.py -> the checkout
    if (checkout / "grammar" / "ave.lark").is_file():
        return checkout
    for prefix in (sys.prefix, sys.base_prefix):
        candidate = Path(prefix) / _SHARE
        if (candidate / "grammar" / "ave.lark").is_file():
            return candidate
    raise FileNotFoundError("ave-decl data files (grammar/, rules/) not found; reinstall the package")


def grammar_path(name: str) -> Path:
    return data_root() / "grammar" / name


def rules_dir() -> Path:
    return data_root() / "rules"
