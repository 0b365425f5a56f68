"""The simulator's state types (values with shadow tags, buffers, results) and small shared helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import jax.numpy as jnp
import ml_dtypes
import numpy as np

from ..hw.instructions import OperandMap
from ..hw.layout import AnyLayout
from ..lang import ast as A
from ..lang.errors import FrontEndError

LMAX = 6  # tag components carried per element


ITYPE = jnp.int32


ROUND = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "fp8": ml_dtypes.float8_e4m3fnuz,
          "bf8": ml_dtypes.float8_e5m2fnuz}


def narrow(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to a narrow element type (bf16, f16, fp8) and back. Values out of its
    range become inf or nan, as the hardware's conversion does: that is the modelled result, not a
    warning for stderr (so the cast is done under np.errstate)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return values.astype(ROUND[dtype]).astype(np.float32)


class SimulationError(FrontEndError):
    """The kernel cannot be simulated at these sizes (bad sizes, divergence the model cannot run)."""

    kind = "simulation"


@dataclass
class Data:
    """A data value of every (block, thread), with its shadow tag (arity 0 = Top)."""

    v: jnp.ndarray  # (B, T) float32
    tag: jnp.ndarray  # (B, T, LMAX) int32
    arity: jnp.ndarray  # (B, T) int32


@dataclass
class Buf:
    name: str
    space: str
    dtype: str
    shape: tuple[int, ...]
    layout: AnyLayout | None
    data: jnp.ndarray  # global: shape; shared: (B, size); local: (B, T, size)
    tag: jnp.ndarray | None = None  # shared/local shadow: data.shape + (LMAX,)
    arity: jnp.ndarray | None = None
    tag_fn: tuple | None = None  # (lambda, captured env) of a tag binding
    written: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class Failure:
    """One assertion site's shadow-check result: how many checks failed and the first failing one."""

    invariant: str
    line: int
    failed: int
    checked: int
    first: dict
    classes: dict = field(default_factory=dict)  # the failing lanes / value slots (sorted), for comparison


@dataclass
class SimResult:
    sizes: dict[str, int]
    blocks: list[tuple[int, ...]]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    failures: list[Failure] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    reference: dict | None = None
    races: list[dict] = field(default_factory=list)  # race_detector.RaceDetector.report()
    write_counts: dict[str, np.ndarray] = field(default_factory=dict)  # global output -> stores per element

    @property
    def shadow_ok(self) -> bool:
        return not any(f.failed for f in self.failures)


def merge_classes(into: dict, new: dict) -> None:
    for key, values in new.items():
        into[key] = sorted(set(into.get(key, [])) | {int(v) for v in np.unique(values)})


def tag_list(tag, arity) -> list[int]:
    n = abs(int(np.asarray(arity)))
    return [int(x) for x in np.asarray(tag)[:n]]


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
    from ..lang.parser import parse_expression

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


def elements(e: A.Expr | None) -> tuple:
    if e is None:
        return ()
    return e.elts if isinstance(e, A.Tuple) else (e,)
