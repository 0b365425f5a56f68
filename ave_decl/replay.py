"""Counterexample replay (`ave check --confirm`): run the simulator at the counterexample's sizes,
on its block, and read back what actually meets at the use site for the reported thread,
iteration and value slot. A counterexample that does not replay is a verifier bug."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .report import Finding
from .source import SourceFile

MAX_ELEMENTS = 1 << 24  # do not replay sizes whose tensors would exceed this many elements


@dataclass
class Replay:
    confirmed: bool
    detail: str
    observed: dict = field(default_factory=dict)


def _tag(tags: np.ndarray, arity: np.ndarray, thread: int, slot: int) -> list[int]:
    n = int(arity[0, thread, slot])
    return [int(x) for x in tags[0, thread, slot, :n]]


def replay(src: SourceFile, kernel: str, finding: Finding) -> Replay:
    from .simulate import SimulationError, simulate_source

    c = finding.counterexample
    assert c is not None
    if np.prod([max(1, v) for v in c.sizes.values()] or [1]) > MAX_ELEMENTS:
        return Replay(False, f"not replayed: sizes {c.sizes} are too large to simulate")
    probe = {"line": finding.location.line, "iterations": c.iterations}
    block = tuple(c.block)
    try:
        runs = simulate_source(src, c.sizes, kernel=kernel, blocks=None, shadow=True, probe=probe,
                               block_prefix=block)
    except SimulationError as exc:
        return Replay(False, f"not replayed: {exc.message}")
    (_, result), = runs
    probes = [p for p in result.probes if p["iterations"] == {**p["iterations"], **c.iterations}]
    if not probes:
        return Replay(False, "the simulator never executed the use site at the reported iteration")
    if finding.invariant == "ave/buffer-bounds":
        hit = any(p["oob"] is not None and p["oob"][0, c.thread_linear] for p in probes)
        idx = tuple(c.lhs.coordinates)
        return Replay(hit, f"thread {c.thread_linear} accesses index {idx} outside the buffer" if hit else
                      f"thread {c.thread_linear} stayed in bounds in the simulator")
    probe0 = next(p for p in probes if p["operands"])
    ops = probe0["operands"]
    if "a" in ops:  # matrix instruction: the two slots the instruction pairs
        ta = c.group_index * c.group_size + (c.lhs.lane or 0)
        tb = c.group_index * c.group_size + (c.rhs.lane or 0)
        a = _tag(*ops["a"], ta, c.lhs.value_index or 0)
        b = _tag(*ops["b"], tb, c.rhs.value_index or 0)
        ka, kb = (a[-1] if a else None), (b[-2] if len(b) >= 2 else (b[0] if b else None))
        same = a == c.lhs.tag and b == c.rhs.tag
        ok = same and ka != kb
        detail = (f"A operand lane {c.lhs.lane} value {c.lhs.value_index} holds {a}, B operand lane {c.rhs.lane} "
                  f"value {c.rhs.value_index} holds {b}: K {ka} vs {kb}")
        return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"a": a, "b": b})
    slot = c.value_index or 0
    lhs = _tag(*ops["lhs"], c.thread_linear, slot)
    rhs = _tag(*ops["rhs"], c.thread_linear, slot)
    same = lhs == c.lhs.tag and rhs == c.rhs.tag
    detail = f"thread {c.thread_linear} slot {slot}: lhs tag {lhs}, rhs tag {rhs}"
    return Replay(same, detail if same else f"mismatch with the report: {detail}", {"lhs": lhs, "rhs": rhs})
