"""Guards on the thread id alone (a wave-specialized arm: `wave_id() < 4`), decided by enumerating
the block's threads: such a guard selects threads, not a range of elements, so the coverage proof
and the cross-arm flow count the threads that pass it instead of reasoning about it in Z3."""
from __future__ import annotations

import numpy as np

from ..facts.view import KernelView
from ..hw.expr import evaluate, symbols
from .smt import Encoder


def thread_only(view: KernelView, cond: int) -> bool:
    """The condition reads the thread id and nothing else (no loop, size, block or data)."""
    names = symbols(view.kf.table, cond)
    return bool(names) and all(n.startswith("tid:") for n in names)


def constant_block(view: KernelView, enc: Encoder) -> bool:
    """Every block dimension is a constant (otherwise the threads cannot be enumerated)."""
    return all(enc.nodes[b].op == "const" for _g, b in view.launch)


def block_threads(enc: Encoder) -> dict[str, np.ndarray]:
    """The thread ids of every thread of the block, as `tid:d` arrays (one entry per linear id)."""
    env, rest = {}, np.arange(enc.block_size())
    for d, extent in enumerate(enc.block_dims()):
        env[f"tid:{d}"], rest = rest % extent, rest // extent
    return env


def passing(view: KernelView, enc: Encoder, guards: list[tuple[int, int]]) -> np.ndarray:
    """Which threads of the block pass every (thread-only) guard, by linear id."""
    env = block_threads(enc)
    keep = np.ones(enc.block_size(), dtype=bool)
    for c, pol in guards:
        hold = np.broadcast_to(np.asarray(evaluate(view.kf.table, c, env)) != 0, keep.shape)
        keep &= hold if pol else ~hold
    return keep
