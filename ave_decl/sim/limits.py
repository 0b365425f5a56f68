"""What the simulator can run: sizes it can represent, and the memory a run needs, checked before
anything is allocated (a MemoryError or an int32 overflow halfway through is no diagnostic)."""
from __future__ import annotations

import math
import os

from ..lang.errors import UsageError
from ..lang.source import Span
from .state import SimulationError

INT32_MAX = 2 ** 31 - 1  # the simulator's index arithmetic is int32 (state.ITYPE)
DEFAULT_MAX_BYTES = 4 * 2 ** 30  # 4 GiB; `ave simulate --max-memory GIB` or AVE_SIM_MAX_MEMORY overrides it
ENV_MAX_MEMORY = "AVE_SIM_MAX_MEMORY"  # GiB, like --max-memory

# bytes per global tensor element: the float32 input, its device copy, the float64 reference copy
TENSOR_BYTES = 4 + 4 + 8
# bytes per (block, thread) of one data value with its shadow tag (state.Data: value, tag, arity)
THREAD_BYTES = 4 + 4 * 6 + 4
# bytes per (block, element) of a shared array's storage: value, tag, arity, the race detector's state
SHARED_BYTES = 4 + 4 * 6 + 4 + 4 * 4


class SimulationTooLarge(UsageError):
    """The sizes asked for need more memory than the limit (exit 2: choose smaller --sizes)."""


def default_max_bytes() -> int:
    """The memory limit: AVE_SIM_MAX_MEMORY (GiB) when set to a positive number, else 4 GiB."""
    text = os.environ.get(ENV_MAX_MEMORY, "").strip()
    try:
        gib = float(text) if text else 0.0
    except ValueError:
        gib = 0.0
    return int(gib * 2 ** 30) if math.isfinite(gib) and 0 < gib <= 2 ** 20 else DEFAULT_MAX_BYTES


def check_size_values(sizes: dict[str, int]) -> None:
    """Every size fits the simulator's int32 index arithmetic and is not negative."""
    for name, value in sizes.items():
        if value < 0:
            raise UsageError(f"size {name}={value} is negative")
        if value > INT32_MAX:
            raise UsageError(f"size {name}={value} does not fit the simulator's 32-bit indices "
                             f"(at most {INT32_MAX})")


def gib(n: int) -> str:
    return f"{n / 2 ** 30:.3g} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.3g} MiB"


def check_memory(tensors: dict[str, tuple[int, ...]], blocks: int, threads: int, max_bytes: int | None) -> int:
    """The bytes a run needs at least (global tensors, and one value with its shadow tag per
    simulated thread); SimulationTooLarge past `max_bytes`. Returns the estimate."""
    limit = default_max_bytes() if max_bytes is None else max_bytes
    tensor_bytes = sum(math.prod(shape) for shape in tensors.values()) * TENSOR_BYTES
    thread_bytes = blocks * threads * THREAD_BYTES
    need = tensor_bytes + thread_bytes
    if need > limit:
        biggest = max(tensors, key=lambda n: math.prod(tensors[n]), default=None)
        what = f"largest tensor {biggest}{tensors[biggest]}" if biggest else "no tensors"
        raise SimulationTooLarge(
            f"simulating at these sizes needs at least {need:,} bytes ({gib(need)}: tensors {gib(tensor_bytes)}, "
            f"{blocks:,} blocks x {threads} threads {gib(thread_bytes)}; {what}), over the limit of {gib(limit)} "
            f"(--max-memory GIB or {ENV_MAX_MEMORY})")
    return need


def check_shared(name: str, cosize: int, blocks: int, max_bytes: int | None, span: Span) -> None:
    """A shared array's storage (a padded layout may span far more than its elements) fits the
    int32 addresses and the memory limit, before it is allocated."""
    if cosize > INT32_MAX:
        raise SimulationError(f"shared array {name}'s layout spans {cosize:,} elements: more than the simulator's "
                              f"32-bit addresses", span)
    limit = default_max_bytes() if max_bytes is None else max_bytes
    need = blocks * cosize * SHARED_BYTES
    if need > limit:
        raise SimulationTooLarge(f"shared array {name} ({cosize:,} elements of storage x {blocks:,} blocks) needs "
                                 f"{gib(need)}, over the limit of {gib(limit)} (--max-memory GIB or {ENV_MAX_MEMORY})")
