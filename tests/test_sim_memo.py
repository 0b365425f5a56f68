"""The simulator's reuse of index values and addresses (sim/interpreter.eval, memory.ArrayMemo):
bounded memory, identity keys, and the same results as recomputing."""
from __future__ import annotations

import numpy as np

from ave_decl.lang.parser import parse_source
from ave_decl.lang.resolve import resolve_imports
from ave_decl.lang.source import SourceFile
from ave_decl.sim import interpreter
from ave_decl.sim.interpreter import Simulator
from ave_decl.sim.memory import ArrayMemo


def _sim(body: str) -> Simulator:
    src = SourceFile("k.ave", "@kernel(grid=(2,), block=(64,), wave=64)\n"
                              "def k(A: Tensor[bf16, (64,)], C: Tensor[f32, (2, 64)]):\n    t = thread_id(0)\n"
                     + "".join(f"    {line}\n" for line in body.splitlines()))
    module = parse_source(src)
    return Simulator(module.kernels[0], resolve_imports(module), {})


def _frozen(*shape: int) -> np.ndarray:
    a = np.zeros(shape, np.int32)
    a.flags.writeable = False
    return a


def test_a_key_is_kept_on_its_second_miss_and_the_least_recent_goes_first():
    memo = ArrayMemo(budget=3 * 400)  # three entries of 100 int32
    srcs = [_frozen(4) for _ in range(4)]
    vals = [np.full(100, i, np.int32) for i in range(4)]
    memo.put(("k", 0), (srcs[0],), (vals[0],))
    assert memo.get(("k", 0)) is None  # a first miss is only remembered as seen
    for i in range(3):
        memo.put(("k", i), (srcs[i],), (vals[i],))
        memo.put(("k", i), (srcs[i],), (vals[i],))
    assert memo.get(("k", 0))[0] is vals[0]  # now the most recently used
    memo.put(("k", 3), (srcs[3],), (vals[3],))
    memo.put(("k", 3), (srcs[3],), (vals[3],))  # over budget: ("k", 1) is the least recent
    assert memo.get(("k", 1)) is None and memo.get(("k", 2)) is not None and memo.get(("k", 3)) is not None
    assert memo.used <= memo.budget and not vals[3].flags.writeable  # kept values are read-only


def test_kept_index_values_are_bounded_per_expression():
    """`i += 1` never repeats a value: its expression keeps at most _KEEP_PER_NODE of them."""
    sim = _sim("i = t\nfor s in range(100):\n    i += 1\nC[0, t] = A[i % 64]")
    sim.run()
    assert all(len(k[2]) <= interpreter._KEEP_PER_NODE for k in sim.kept.values())
    assert sim.kept_bytes <= interpreter._KEEP_BYTES


def test_reused_indices_and_slot_stores_give_what_recomputing_gives():
    """An inner loop's indices reused across an outer loop, register-slot stores of every lane and
    of some lanes, a shared bf16 round trip: the same outputs with the memos emptied before
    every statement (nothing reused) as with them."""
    body = ("S = shared(bf16, (64,))\nr = local(bf16, (4,))\nacc = local(f32, (4,), init=0)\n"
            "for o in range(3):\n    for v in range(4):\n        S[(t + 16 * v + o) % 64] = A[(t + v) % 64]\n"
            "        syncthreads()\n        r[v] = S[(t * 3 + v) % 64]\n        if t < 32:\n"
            "            r[v] = A[(t + 7 * v) % 64]\n        syncthreads()\n        acc[v] = acc[v] + r[v]\n"
            "C[block_id(0), t] = acc[0] + acc[1] + acc[2] + acc[3]")
    reused = _sim(body)
    got = reused.run()

    fresh = _sim(body)
    step = fresh.stmt

    def forgetful(s):
        fresh.kept.clear()
        fresh.kept_bytes = 0
        fresh.addresses = ArrayMemo(fresh.addresses.budget)
        step(s)

    fresh.stmt = forgetful  # type: ignore[method-assign]
    want = fresh.run()
    assert reused.addresses.entries  # the memo was used
    np.testing.assert_array_equal(got.outputs["C"].view(np.uint32), want.outputs["C"].view(np.uint32))
    assert got.races == want.races and [f.failed for f in got.failures] == [f.failed for f in want.failures]


_STORES = """
@kernel(grid=(M // 64,), block=64, wave=32)
def k(A: Tensor[f32, (M, K)], C: Tensor[f32, (M, K)]):
    assume(M % 64 == 0, K % 4 == 0)
    t = thread_id(0)
    bm = block_id(0) * 64
    S = shared(f32, (64,))
    for kt in range(0, K, 1):
        S[{index}] = A[bm + t, kt]
        syncthreads()
        C[bm + t, kt] = S[t]
        syncthreads()
"""


def test_a_kept_store_skips_the_race_read_back_only_when_its_cells_are_distinct(monkeypatch):
    """memory._shared_cells: a shared store of every lane through a kept address remembers whether
    two lanes write one element; when none does, the race detector does not read its scatter back.
    Races and outputs must be those of the read-back path, for a distinct and a colliding index
    (`// 2`: lanes 31 and 32, of two waves, write one element in one instruction: WAW)."""
    from ave_decl.sim import memory
    from ave_decl.sim.run import simulate_source

    def run(index: str) -> tuple:
        (_name, res), = simulate_source(SourceFile("k.ave", _STORES.format(index=index)), {"M": 128, "K": 8},
                                        compare_reference=False)
        races = sorted((r["kind"], r["first_line"], r["second_line"], r["count"]) for r in res.races)
        return races, {n: v.tobytes() for n, v in res.outputs.items()}

    flags: list[bool] = []
    kept = memory.MemoryModel._shared_cells

    def watched(self, *args):
        cells, distinct = kept(self, *args)
        flags.append(distinct)
        return cells, distinct

    monkeypatch.setattr(memory.MemoryModel, "_shared_cells", watched)
    distinct, colliding = run("(t * 7) % 64"), run("((t * 7) % 64) // 2")
    assert set(flags) == {True, False}, f"one of the two paths was never taken ({set(flags)}): nothing is compared"
    assert [r[0] for r in colliding[0]] == ["WAW"] and not distinct[0]
    monkeypatch.setattr(memory, "_distinct", lambda cells, extent: False)  # every store reads its scatter back
    assert run("(t * 7) % 64") == distinct
    assert run("((t * 7) % 64) // 2") == colliding
