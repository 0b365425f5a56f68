"""The simulator's race detector against a per-lane model of its rules (docs/simulator.md, Races).

The detector is vectorised (packed int32 words, loads held back until a store of the same epoch
needs them, several groups in one instruction found by reading a scatter back); the model below
walks every lane in order with plain dicts, so the two share no code. Random programs of loads,
stores and barriers over a few elements, groups and lines (duplicate elements in one instruction
included) must give the same report: kinds, lines, counts and first examples.
"""
from __future__ import annotations

import numpy as np
import pytest

from ave_decl.sim.race_detector import RaceDetector

MULTI = -2


class Model:
    """Per element: the last store's (epoch, group, line); per load line: (epoch, group or MULTI)."""

    def __init__(self, group_of: np.ndarray):
        self.group_of, self.epoch = group_of, 0
        self.store: dict[int, tuple[int, int, int]] = {}
        self.readers: dict[int, dict[int, tuple[int, int]]] = {}  # load line -> element -> (epoch, group)
        self.races: dict[tuple[str, int, int], dict] = {}

    def record(self, kind: str, hits: list[tuple[int, int, int, int, int]], line: int, iters: dict) -> None:
        """hits: (first line, block, thread, element, other group) in lane order."""
        for first in sorted({h[0] for h in hits}):
            mine = [h for h in hits if h[0] == first]
            race = self.races.setdefault((kind, first, line), {"count": 0, "example": {}})
            race["count"] += len(mine)
            if not race["example"]:
                _, b, t, a, other = mine[0]
                race["example"] = {"block_index": b, "thread": t, "element": a, "other_group": other,
                                   "iterations": dict(iters)}

    def access(self, size: int, kind: str, bs, ts, addrs, line: int, iters: dict) -> None:
        lanes = [(int(b), int(t), int(a), int(b) * size + int(a), int(self.group_of[t]))
                 for b, t, a in zip(bs, ts, addrs)]
        now = self.epoch
        if kind == "load":
            raw = [(self.store[c][2], b, t, a, self.store[c][1]) for b, t, a, c, g in lanes
                   if c in self.store and self.store[c][0] == now and self.store[c][1] != g]
            self.record("RAW", raw, line, iters)
            rd = self.readers.setdefault(line, {})
            before = {c: (rd[c][1] if c in rd and rd[c][0] == now else -1) for _, _, _, c, _ in lanes}
            for _, _, _, c, g in lanes:
                cur = before[c]
                rd[c] = (now, g if cur == -1 else (cur if cur == g else MULTI))
            for c in before:
                if len({g for _, _, _, cc, g in lanes if cc == c}) > 1:
                    rd[c] = (now, MULTI)
            return
        for load_line, rd in self.readers.items():
            war = [(load_line, b, t, a, rd[c][1]) for b, t, a, c, g in lanes
                   if c in rd and rd[c][0] == now and (rd[c][1] == MULTI or rd[c][1] != g)]
            self.record("WAR", war, line, iters)
        waw = [(self.store[c][2], b, t, a, self.store[c][1]) for b, t, a, c, g in lanes
               if c in self.store and self.store[c][0] == now and self.store[c][1] != g]
        self.record("WAW", waw, line, iters)
        groups: dict[int, set[int]] = {}
        for _, _, _, c, g in lanes:
            groups.setdefault(c, set()).add(g)
        clash = [(line, b, t, a, max(groups[c]) if g == min(groups[c]) else min(groups[c]))
                 for b, t, a, c, g in lanes if len(groups[c]) > 1]
        self.record("WAW", clash, line, iters)
        for _, _, _, c, g in lanes:
            self.store[c] = (now, g, line)

    def report(self) -> list[dict]:
        rows = [{"kind": k, "buffer": "s", "first_line": first, "second_line": line, **v}
                for (k, first, line), v in self.races.items()]
        return sorted(rows, key=lambda r: (r["second_line"], r["kind"]))


def _program(rng: np.random.Generator, blocks: int, threads: int, size: int) -> list[tuple]:
    steps = []
    for _ in range(int(rng.integers(5, 40))):
        r = rng.random()
        if r < 0.15:
            steps.append(("barrier",))
            continue
        lanes = np.flatnonzero(rng.random(blocks * threads) < rng.choice([0.3, 1.0]))
        if lanes.size == 0:
            continue
        addrs = rng.integers(0, size, lanes.size)  # few elements: lanes of one instruction collide
        kind = "load" if r < 0.6 else "store"
        line = int(rng.choice([10, 11, 12] if kind == "load" else [20, 21]))
        steps.append((kind, lanes // threads, lanes % threads, addrs, line))
    return steps


def _run(seed: int) -> tuple[RaceDetector, Model]:
    """The detector and the model after one random program."""
    rng = np.random.default_rng(seed)
    blocks, threads, size = 2, 8, int(rng.integers(3, 12))
    group_of = np.arange(threads) // int(rng.choice([1, 2, 4]))
    det, model = RaceDetector(blocks, threads, group_of), Model(group_of)
    every = np.arange(blocks * threads)
    all_bs, all_ts = every // threads, every % threads
    for i, step in enumerate(_program(rng, blocks, threads, size)):
        if step[0] == "barrier":
            det.barrier()
            model.epoch += 1
            continue
        kind, bs, ts, addrs, line = step
        if bs.size == blocks * threads:  # every lane: the simulator passes the same arrays each time
            bs, ts = all_bs, all_ts
        det.access(1, "s", size, kind, bs, ts, addrs, line, {"i": i})
        model.access(size, kind, bs, ts, addrs, line, {"i": i})
    return det, model


@pytest.mark.parametrize("seed", range(40))
def test_the_detector_reports_what_the_per_lane_model_does(seed: int) -> None:
    det, model = _run(seed)
    assert det.report() == model.report()


def test_the_random_programs_hold_each_kind_of_race() -> None:
    """The comparison is not vacuous: each kind of race occurs in some of the programs."""
    assert {r["kind"] for seed in range(40) for r in _run(seed)[0].report()} == {"RAW", "WAR", "WAW"}
