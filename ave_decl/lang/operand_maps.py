"""Operand maps of the instruction library as integer tables: (lane, value slot) -> (row, col).

One evaluator for the simulator, the host target's instruction emulation and the tests: the map
strings of hw/instructions.py are parsed by the `.ave` expression grammar and walked over numpy
arrays (never `eval`).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..hw.instructions import OperandMap
from . import ast as A


@lru_cache(maxsize=None)
def slot_maps(op: OperandMap, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of every (lane, value) slot, as (lanes, values) integer arrays."""
    lane, v = np.meshgrid(np.arange(lanes), np.arange(op.values), indexing="ij")
    env = {"lane": lane, "v": v}
    return map_values(op.row, env), map_values(op.col, env)


_MAP_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod,
            "^": np.bitwise_xor, "&": np.bitwise_and, "|": np.bitwise_or, "<<": np.left_shift,
            ">>": np.right_shift}


def map_values(text: str, env: dict[str, np.ndarray]) -> np.ndarray:
    """An operand-map string of the instruction library (`"lane % 32"`), parsed by the `.ave`
    expression grammar and evaluated by walking its AST over integer arrays (never `eval`)."""
    from .parser import parse_expression

    return np.asarray(_map_value(parse_expression(text), env, text))


def _map_value(e: A.Expr, env: dict[str, np.ndarray], text: str):
    if isinstance(e, A.Int):
        return e.value
    if isinstance(e, A.Name) and e.id in env:
        return env[e.id]
    if isinstance(e, A.BinOp) and e.op in _MAP_OPS:
        return _MAP_OPS[e.op](_map_value(e.left, env, text), _map_value(e.right, env, text))
    if isinstance(e, A.UnaryOp) and e.op in ("-", "+", "~"):
        x = _map_value(e.operand, env, text)
        return {"-": np.negative, "+": np.positive, "~": np.invert}[e.op](x)
    raise ValueError(f"operand map {text!r}: unsupported {type(e).__name__}")  # library data, not user input
