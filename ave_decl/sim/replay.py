"""Counterexample replay (`ave check --confirm`): run the simulator at the counterexample's sizes,
on its block, and read back what actually meets at the use site for the reported thread,
iteration and value slot. A counterexample that does not replay is a verifier bug."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..lang.source import SourceFile
from ..report.model import Finding

MAX_ELEMENTS = 1 << 24  # do not replay sizes whose tensors would exceed this many elements


@dataclass
class Replay:
    confirmed: bool
    detail: str
    observed: dict = field(default_factory=dict)


def _tag(tags: np.ndarray, arity: np.ndarray, thread: int, slot: int) -> list[int]:
    n = abs(int(arity[0, thread, slot]))  # negative: a row statistic
    return [int(x) for x in tags[0, thread, slot, :n]]


def _dropped(tags: np.ndarray, arity: np.ndarray, thread: int, slot: int, row: list[int]) -> int:
    """The tag component a statistic dropped (sim/statistics.py keeps it in the last shadow slot);
    a value that is no statistic: past its last component."""
    return int(tags[0, thread, slot, -1]) if int(arity[0, thread, slot]) < 0 else len(row)


def _row_of(full: list[int], d: int) -> list[int]:
    return full[:d] + full[d + 1:]


def replay(src: SourceFile, kernel: str, finding: Finding) -> Replay:
    """Replay with asynchronous copies landing as late as allowed (at the wait); when that does
    not reproduce the counterexample, once more with copies landing at issue: both are schedules
    the hardware may pick, and the verifier's counterexample names one of them."""
    first = _replay(src, kernel, finding, "wait")
    if not first.confirmed and INDEX_TENSOR.search(src.text):
        return _replay_on_own_inputs(src, kernel, finding, first)
    if first.confirmed or "async_copy" not in src.text:
        return first
    second = _replay(src, kernel, finding, "issue")
    if second.confirmed:
        second.detail += " (asynchronous copies landing at issue)"
        return second
    return first


INDEX_TENSOR = re.compile(r"Tensor\[\w+, \([^)]*\), (permutation|\()")


def _replay_on_own_inputs(src: SourceFile, kernel: str, finding: Finding, exact: Replay) -> Replay:
    """Kernels with index tensors, when the exact replay (the simulator's tables made to hold the
    counterexample's `index_tables` entries) does not reproduce it: the simulator's exhaustive
    shadow check of the same invariant at the same statement, on its own (valid) routing tables,
    confirms the violation class instead, and says so."""
    from .run import simulate_source

    c = finding.counterexample
    for seed in range(4):  # a few draws of the tables (small sizes can make two entries coincide)
        ((_, result),) = simulate_source(src, c.sizes, kernel=kernel, shadow=True, seed=seed,
                                           compare_reference=False)
        for f in result.failures:
            if f.invariant == finding.invariant and f.line == finding.location.line and f.failed:
                return Replay(True, f"on the simulator's own index tensors (seed {seed}): {f.failed} of {f.checked} "
                                    f"checks of {f.invariant} fail at line {f.line} (exact replay: {exact.detail})")
    return exact


def _tensor_elements(src: SourceFile, kernel: str, sizes: dict[str, int]) -> int:
    """Elements of all the kernel's tensor parameters at these sizes (what the simulator allocates;
    a size the counterexample does not name is left to the simulator to report)."""
    from ..lang.parser import parse_source
    from .inputs import tensor_shape

    try:
        return sum(math.prod(tensor_shape(p, sizes)) for k in parse_source(src).kernels if k.name == kernel
                   for p in k.params)
    except KeyError:
        return 0


def _replay(src: SourceFile, kernel: str, finding: Finding, async_land: str) -> Replay:
    from .run import simulate_source
    from .state import SimulationError

    c = finding.counterexample
    assert c is not None
    if _tensor_elements(src, kernel, c.sizes) > MAX_ELEMENTS:
        return Replay(False, f"not replayed: sizes {c.sizes} are too large to simulate")
    k_cov = finding.invariant == "ave/mma-k-coverage"
    iterations = _plain(c.iterations)
    probe = {"line": finding.location.line, "iterations": {} if k_cov else iterations}
    # coverage involves every block; everything else replays the counterexample's block only
    block = None if finding.invariant == "ave/output-coverage" else tuple(c.block)
    try:
        runs = simulate_source(src, c.sizes, kernel=kernel, blocks=None, shadow=True, probe=probe, async_land=async_land,
                               index_entries=c.index_tables,
                               block_prefix=block, compare_reference=False)
    except SimulationError as exc:
        if finding.invariant == "ave/output-coverage" and "is empty at these sizes" in exc.message:
            return Replay(True, f"no block runs at sizes {c.sizes} ({exc.message}), so the output is never written")
        return Replay(False, f"not replayed: {exc.message}")
    (_, result), = runs
    if finding.invariant in ("ave/shared-race", "ave/async-copy-wait"):
        return _replay_race(result, c)
    if finding.invariant == "ave/output-coverage":
        return _replay_coverage(result, c)
    if finding.invariant == "ave/lane-convergence" or (finding.invariant == "ave/shared-round-trip"
                                                         and "address" in c.instruction):
        return _replay_failure(result, finding)
    if k_cov:
        return _replay_k_twice(result, c)
    operands = _mma_operands(c.lhs.chain) if finding.invariant in STORED_TAG else None
    if operands is not None:
        return _replay_mma_result(src, kernel, c, operands, async_land)
    probes = [p for p in result.probes if p["iterations"] == {**p["iterations"], **iterations}]
    if not probes:
        return Replay(False, "the simulator never executed the use site at the reported iteration")
    if finding.invariant in ("ave/buffer-bounds", "ave/global-bounds"):
        hit = any(p["oob"] is not None and p["oob"][0, c.thread_linear] for p in probes)
        idx = tuple(c.lhs.coordinates)
        return Replay(hit, f"thread {c.thread_linear} accesses index {idx} outside the buffer" if hit else
                      f"thread {c.thread_linear} stayed in bounds in the simulator")
    if finding.invariant == "ave/barrier-divergence":
        return _replay_barriers(probes, c)
    if finding.invariant == "ave/row-statistics" and c.lhs.label == "lane":
        return _replay_reduce(probes, c)
    if finding.invariant == "ave/row-statistics" and c.lhs.label == "slot":
        return _replay_slot_reduce(probes, c)
    if finding.invariant == "ave/row-statistics":
        probes = [p for p in probes if p["source"] == "combine"] or probes
        return _replay_combine(probes, c)
    probe0 = next(p for p in probes if p["operands"])
    ops = probe0["operands"]
    if finding.invariant == "ave/masked-flow":
        return _replay_flow(probe0, c)
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


def _replay_flow(probe: dict, c) -> Replay:
    """The simulator holds the reported element, tagged as reported, at the thread and slot, kept
    (a leak) or masked off (a wrongly removed element) as the report says."""
    slot = c.value_index or 0
    tag = _tag(*probe["operands"]["lhs"], c.thread_linear, slot)
    masked = bool(probe["extra"]["masked"][0, c.thread_linear, slot]) if "masked" in probe["extra"] else False
    ok = tag == c.lhs.tag and masked == c.rhs.label.startswith("masked")
    detail = f"thread {c.thread_linear} slot {slot} holds an element tagged {tag}, {'masked' if masked else 'unmasked'}"
    return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"tag": tag, "masked": masked})


def _plain(iterations: dict[str, int]) -> dict[str, int]:
    """Report keys `e@33` (a loop name used twice) -> the simulator's plain loop names."""
    return {k.split("@")[0]: v for k, v in iterations.items()}


STORED_TAG = ("ave/epilogue-placement", "ave/shared-round-trip")


def _mma_operands(chain) -> dict | None:
    """The matrix instruction behind a stored value: its line, iterations, and the thread and
    register slot of the A and B operand elements the counterexample multiplied."""
    out: dict = {}
    for i, p in enumerate(chain):
        if p.kind == "mma-operand" and "line" in out and (p.location.line, _plain(p.iterations)) != (
                out["line"], out["iterations"]):
            continue  # an operand of a nested instruction (the A chain of P V passes through Q K^T)
        if p.kind == "mma-operand" and p.note in ("A operand", "B operand") and p.note[0] not in out:
            slot = next((q.note for q in chain[i + 1:i + 2] if q.note.startswith("slot ")), None)
            if slot is None:
                return None
            out[p.note[0]] = (p.thread, int(slot.split()[1]))
            out.setdefault("line", p.location.line)
            out.setdefault("iterations", _plain(p.iterations))
    return out if "A" in out and "B" in out else None


def _replay_mma_result(src: SourceFile, kernel: str, c, ops: dict, async_land: str) -> Replay:
    """Read the two operand elements back at the instruction and rebuild the result's tag."""
    from .run import simulate_source

    probe = {"line": ops["line"], "iterations": ops["iterations"]}
    ((_, result),) = simulate_source(src, c.sizes, kernel=kernel, shadow=True, probe=probe,
                                     block_prefix=tuple(c.block), async_land=async_land, index_entries=c.index_tables,
                                     compare_reference=False)
    p = next((p for p in result.probes if p["iterations"] == ops["iterations"] and "a" in p["operands"]), None)
    if p is None:
        return Replay(False, "the simulator never executed the matrix instruction at the reported iteration")
    a = _tag(*p["operands"]["a"], *ops["A"])
    b = _tag(*p["operands"]["b"], *ops["B"])
    tag = a[:-1] + b[-1:] if a and b else []
    ok = tag == c.lhs.tag and tag != c.rhs.tag
    detail = (f"at {ops['iterations']} the A operand (thread {ops['A'][0]}, slot {ops['A'][1]}) holds {a} and the B "
              f"operand (thread {ops['B'][0]}, slot {ops['B'][1]}) holds {b}: result tag {tag}, stored at a place "
              f"tagged {c.rhs.tag}")
    return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"a": a, "b": b})


def _replay_combine(probes: list[dict], c) -> Replay:
    """A statistic met a value (or a statistic) of another row: one of the operand checks the
    simulator recorded at this statement, at the reported thread, is the reported pair."""
    t = c.thread_linear
    seen = []
    for p in probes:
        (lt, la), (rt, ra) = p["operands"]["lhs"], p["operands"]["rhs"]
        a, b = _tag(lt, la, t, 0), _tag(rt, ra, t, 0)
        d, full = _dropped(lt, la, t, 0, a), int(ra[0, t, 0]) > 0
        seen.append((a, b))
        row = _row_of(b, d) if full else b  # a full value's row: without the component the statistic dropped
        differs = a != row[:len(a)] or (not full and _dropped(rt, ra, t, 0, b) != d)
        lhs = _row_of(c.lhs.tag, d) if len(c.lhs.tag) > len(c.rhs.tag) else c.lhs.tag
        if differs and {tuple(a), tuple(row[:len(a)])} == {tuple(lhs[:len(c.rhs.tag)]), tuple(c.rhs.tag)}:
            return Replay(True, f"thread {t}: statistic {a} meets {b}", {"statistic": a, "value": b})
    return Replay(False, f"mismatch with the report: thread {t} operands {seen}")


def _replay_reduce(probes: list[dict], c) -> Replay:
    """Two lanes of one reduction group hold elements of different rows."""
    p = next((p for p in probes if p["source"] == "reduce"), None)
    if p is None:
        return Replay(False, "the simulator never executed the reduction at the reported iteration")
    t1, t2 = c.lhs.chain[0].thread, c.rhs.chain[0].thread
    a, b = _tag(*p["operands"]["lhs"], t1, 0), _tag(*p["operands"]["lhs"], t2, 0)
    d1, d2 = _dropped(*p["operands"]["lhs"], t1, 0, a), _dropped(*p["operands"]["lhs"], t2, 0, b)
    ok = (a != b or d1 != d2) and a in (c.lhs.tag, _row_of(c.lhs.tag, d1)) and b in (c.rhs.tag, _row_of(c.rhs.tag, d2))
    detail = f"row of lane {t1}: {a}, row of lane {t2}: {b}"
    return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"first": a, "second": b})


def _replay_slot_reduce(probes: list[dict], c) -> Replay:
    """Two slots of one thread's register array hold elements of different rows."""
    p = next((p for p in probes if p["source"] == "slot_reduce"), None)
    if p is None:
        return Replay(False, "the simulator never executed the slot reduction at the reported iteration")
    t, s1, s2 = c.thread_linear, c.lhs.value_index or 0, c.rhs.value_index or 0
    a, b = _tag(*p["operands"]["lhs"], t, s1), _tag(*p["operands"]["lhs"], t, s2)
    d1, d2 = _dropped(*p["operands"]["lhs"], t, s1, a), _dropped(*p["operands"]["lhs"], t, s2, b)
    ok = (a != b or d1 != d2) and a in (c.lhs.tag, _row_of(c.lhs.tag, d1)) and b in (c.rhs.tag, _row_of(c.rhs.tag, d2))
    detail = f"thread {t}: row of slot {s1}: {a}, row of slot {s2}: {b}"
    return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"first": a, "second": b})


def _replay_failure(result, finding: Finding) -> Replay:
    """The simulator's own check of the invariant failed at the statement (lane convergence: a
    group ran it with lanes both running and idle; a store landed in another, tagged subview)."""
    for f in result.failures:
        if f.invariant == finding.invariant and f.line == finding.location.line and f.failed:
            return Replay(True, f"the simulator's check failed {f.failed} time(s) at line {f.line}; first: {f.first}",
                          {"failed": f.failed})
    return Replay(False, f"the simulator's check of {finding.invariant} held at line {finding.location.line}")


def _replay_barriers(probes: list[dict], c) -> Replay:
    """The two threads took the reported arms of the `if` and reached the reported barrier counts
    in it (the simulator runs both arms in lockstep and counts each thread's barriers)."""
    t1, t2 = (side.chain[0].thread for side in (c.lhs, c.rhs))
    want = (c.lhs.tag[0], c.rhs.tag[0])
    for p in probes:
        reached, then = p["extra"]["barriers"], p["extra"]["then"]
        seen = (int(reached[0, t1]), int(reached[0, t2]))
        arms = (bool(then[0, t1]), bool(then[0, t2]))
        if seen == want and arms == (True, False):
            return Replay(True, f"thread {t1} reached {seen[0]} barrier(s) in the then arm, thread {t2} {seen[1]} in "
                                f"the else arm", {"barriers": list(seen)})
    got = [(int(p["extra"]["barriers"][0, t1]), int(p["extra"]["barriers"][0, t2])) for p in probes]
    return Replay(False, f"the simulator saw barrier counts {got} for threads {t1} and {t2}, not {want}")


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
    if counts is None and c.rhs.kind == "missing":
        return Replay(True, f"the simulation never wrote {buf}: element {tuple(c.lhs.coordinates)} is not written")
    if counts is None:
        return Replay(False, f"the simulation never wrote {buf}")
    if c.rhs.kind == "missing":  # an element no store instance writes
        shape = tuple(c.rhs.coordinates)
        flat = int(np.ravel_multi_index(tuple(c.lhs.coordinates), shape))
        n = int(counts[flat])
        return Replay(n == 0, f"element {tuple(c.lhs.coordinates)} of {buf} was written {n} times")
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

    first_iters, second_iters = _plain(c.iterations), _plain(c.rhs.chain[0].iterations)
    p1, p2 = at(first_iters), at(second_iters)
    if p1 is None or p2 is None:
        return Replay(False, "the simulator never executed the instruction at both reported iterations")
    base = c.group_index * c.group_size
    a1 = _tag(*p1["operands"]["a"], base + (c.lhs.lane or 0), c.lhs.value_index or 0)
    a2 = _tag(*p2["operands"]["a"], base + (c.rhs.lane or 0), c.rhs.value_index or 0)
    # the double-counted K index is the property (other components may be index-tensor reads whose
    # model values are not the simulator's inputs)
    ok = bool(a1) and bool(a2) and a1[-1] == a2[-1] == c.lhs.tag[-1]
    detail = f"A operand at {first_iters}: {a1}; at {second_iters}: {a2}"
    return Replay(ok, detail if ok else f"mismatch with the report: {detail}", {"first": a1, "second": a2})
