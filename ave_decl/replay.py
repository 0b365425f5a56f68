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
    k_cov = finding.invariant == "ave/mma-k-coverage"
    probe = {"line": finding.location.line, "iterations": {} if k_cov else c.iterations}
    # coverage involves every block; everything else replays the counterexample's block only
    block = None if finding.invariant == "ave/output-coverage" else tuple(c.block)
    try:
        runs = simulate_source(src, c.sizes, kernel=kernel, blocks=None, shadow=True, probe=probe,
                               block_prefix=block)
    except SimulationError as exc:
        return Replay(False, f"not replayed: {exc.message}")
    (_, result), = runs
    if finding.invariant in ("ave/shared-race", "ave/async-copy-wait"):
        return _replay_race(result, c)
    if finding.invariant == "ave/output-coverage":
        return _replay_coverage(result, c)
    if k_cov:
        return _replay_k_twice(result, c)
    probes = [p for p in result.probes if p["iterations"] == {**p["iterations"], **c.iterations}]
    if not probes:
        return Replay(False, "the simulator never executed the use site at the reported iteration")
    if finding.invariant in ("ave/buffer-bounds", "ave/global-bounds"):
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


def _replay_race(result, c) -> Replay:
    """The simulator's race detector saw the two program points touch one element in one
    barrier interval (or a load overtake an async copy)."""
    load, other = c.lhs.chain[0], c.rhs.chain[0]
    # the lockstep run fixes one order of the two accesses (an async copy lands at the wait), so
    # any race between the two program points confirms the unordered pair
    kinds = ("RAW", "WAR", "WAW", "ASYNC")
    first, second = other.location.line, load.location.line
    for race in result.races:
        if {race["first_line"], race["second_line"]} == {first, second}:
            ex = race["example"]
            return Replay(True, f"the simulator's race detector saw a {race['kind']} race between lines {first} and "
                                f"{second} on {race['buffer']} ({race['count']} accesses; e.g. thread {ex['thread']} "
                                f"at {ex['iterations']})", {"race": race})
    return Replay(False, f"no {'/'.join(kinds)} race between lines {first} and {second} in the simulation")


def _replay_coverage(result, c) -> Replay:
    buf = c.lhs.chain[0].buffer if c.lhs.chain else c.lhs.tag_name
    counts = result.write_counts.get(buf)
    if counts is None:
        return Replay(False, f"the simulation never wrote {buf}")
    if c.rhs.kind == "index":  # write_count
        bad = int(np.count_nonzero(counts != 1))
        return Replay(bad > 0, f"{bad} of {counts.size} elements of {buf} are not written exactly once "
                               f"(min {int(counts.min())}, max {int(counts.max())} writes)")
    shape = result.inputs.get(buf, np.empty(0)).shape if buf in result.inputs else None
    if shape is None:
        return Replay(False, f"the shape of {buf} is unknown to the replay")
    flat = int(np.ravel_multi_index(tuple(c.lhs.coordinates), shape))
    n = int(counts[flat])
    return Replay(n >= 2, f"element {tuple(c.lhs.coordinates)} of {buf} was written {n} times")


def _replay_k_twice(result, c) -> Replay:
    def at(iters: dict) -> dict | None:
        return next((p for p in result.probes if p["iterations"] == iters and "a" in p["operands"]), None)

    first_iters, second_iters = c.iterations, c.rhs.chain[0].iterations
    p1, p2 = at(first_iters), at(second_iters)
    if p1 is None or p2 is None:
        return Replay(False, "the simulator never executed the instruction at both reported iterations")
    base = c.group_index * c.group_size
    a1 = _tag(*p1["operands"]["a"], base + (c.lhs.lane or 0), c.lhs.value_index or 0)
    a2 = _tag(*p2["operands"]["a"], base + (c.rhs.lane or 0), c.rhs.value_index or 0)
    ok = bool(a1) and bool(a2) and a1 == c.lhs.tag and a2 == c.rhs.tag and a1[-1] == a2[-1]
    detail = f"A operand at {first_iters}: {a1}; at {second_iters}: {a2}"
    return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"first": a1, "second": a2})
