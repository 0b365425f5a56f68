"""The simulator's state types (values with shadow tags, buffers, results) and small shared helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from ..hw.layout import AnyLayout
from ..lang import ast as A
from ..lang.errors import FrontEndError
from ..lang.operand_maps import map_values, slot_maps  # noqa: F401  (re-exported for the simulator)

LMAX = 6  # tag components carried per element
# A known zero (a literal 0 stored as padding, a masked load's default): arity 0 like Top, with
# this marker in component 0 (docs/language.md, Zero tags). Everything that treats arity 0 as
# Top treats a zero so, except a matrix instruction, where a zero operand pairs with anything.
ZERO_MARK = -(2**31) + 7


ITYPE = np.int32


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


def is_zero(tag, arity):
    """Which elements hold a known zero (shadow tags of shape (..., LMAX) and arities (...))."""
    return (arity == 0) & (tag[..., 0] == ZERO_MARK)


def masked_of(d: "Data") -> np.ndarray:
    """Data.masked as an array (all False where None)."""
    return d.masked if d.masked is not None else np.zeros(d.arity.shape, bool)


@dataclass
class Data:
    """A data value of every (block, thread), with its shadow tag (arity 0 = Top)."""

    v: np.ndarray  # (B, T) float32
    tag: np.ndarray  # (B, T, LMAX) int32
    arity: np.ndarray  # (B, T) int32
    # the tagged source came through the untagged branch of a select (masked off); None: nowhere
    # (the static side's Alt.flow; checked by assert_mask)
    masked: np.ndarray | None = None
    # the narrow type (state.ROUND) every value already holds exactly, or None: a load of an array
    # of that type, in any space (only rounded inputs, rounding stores, rounded fills and zeros
    # ever fill one: inputs.random_inputs, MemoryModel._store, the interpreter's local arrays and
    # matrix results), whose store into an array of the same type may skip rounding again
    # (narrow() of a narrowed value is that value)
    exact: str | None = None


@dataclass
class Buf:
    name: str
    space: str
    dtype: str
    shape: tuple[int, ...]
    layout: AnyLayout | None
    data: np.ndarray  # global: shape; shared: (B, size); local: (B, T, size)
    tag: np.ndarray | None = None  # shared/local shadow: data.shape + (LMAX,)
    arity: np.ndarray | None = None
    tag_fn: tuple | None = None  # (lambda, captured env) of a tag binding
    masked: np.ndarray | None = None  # shared/local: Data.masked of each element, once one was stored
    written: bool = False
    cosize: int | None = None  # shared: the storage a padded layout spans (one past its largest offset)
    storage: "Buf | None" = None  # a subview: the shared buffer whose arrays it shares (its layout is Based)
    moving: bool = False  # a subview whose offset moves with a loop: its loads read the stored tags
    views: list = field(default_factory=list)  # a shared buffer: its subviews

    @property
    def size(self) -> int:
        """The elements the buffer's storage holds (a padded shared layout's cosize)."""
        return self.cosize if self.cosize is not None else math.prod(self.shape)


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


def elements(e: A.Expr | None) -> tuple:
    if e is None:
        return ()
    return e.elts if isinstance(e, A.Tuple) else (e,)
