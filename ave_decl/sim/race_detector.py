"""Barrier-interval race detection for the simulator.

The simulator runs a block in lockstep, so a missing barrier never changes its outputs. This
detector still sees the race: an epoch counter advances at every `syncthreads()`, and two
accesses to one shared-memory element by different ordering groups (waves on `wave=` kernels,
threads on `warp=` kernels) in the same epoch, at least one a store, are a race, whatever order
the lockstep run happened to give them. Per buffer it keeps, for every (block, element), the
epoch, group and line of the last store and of the loads since.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MULTI = -2  # several groups read the element in this epoch


@dataclass
class Race:
    kind: str  # RAW | WAR | WAW | ASYNC (a load of an async copy's destination before it landed)
    buffer: str
    first_line: int  # the earlier access (store for RAW/WAW, load for WAR)
    second_line: int
    count: int = 0
    example: dict = field(default_factory=dict)


@dataclass
class _Track:
    """Per (block, element) of one buffer, flat (block * size + element): the last store's epoch,
    group and line."""

    w_epoch: np.ndarray
    w_group: np.ndarray
    w_line: np.ndarray
    scratch: np.ndarray  # one instruction's groups per element (RaceDetector._several_groups)
    # per load line: (epoch, group) of that line's last reads of each element, so a WAR race is
    # attributed to every load statement that read the element in the epoch, not only the last
    readers: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class RaceDetector:
    def __init__(self, blocks: int, threads: int, group_of: np.ndarray):
        self.B, self.T = blocks, threads
        self.group_of = group_of.astype(np.int32)  # thread -> ordering group
        self.epoch = 0
        self.tracks: dict[int, _Track] = {}
        self.races: dict[tuple[str, str, int, int], Race] = {}

    def _full(self, size: int, v: int) -> np.ndarray:
        return np.full(self.B * size, v, np.int32)

    def barrier(self) -> None:
        self.epoch += 1

    def _track(self, key: int, size: int) -> _Track:
        if key not in self.tracks:
            self.tracks[key] = _Track(self._full(size, -1), self._full(size, -1), self._full(size, 0),
                                      self._full(size, -1))
        return self.tracks[key]

    def _record(self, kind: str, name: str, first: np.ndarray, line: int, bs, ts, addrs, other, iters) -> None:
        for first_line in np.unique(first):
            sel = first == first_line
            key = (kind, name, int(first_line), line)
            race = self.races.setdefault(key, Race(kind, name, int(first_line), line))
            race.count += int(sel.sum())
            if not race.example:
                i = int(np.argmax(sel))
                race.example = {"block_index": int(bs[i]), "thread": int(ts[i]), "element": int(addrs[i]),
                                "other_group": int(other[i]), "iterations": dict(iters)}

    def access(self, key: int, name: str, size: int, kind: str, bs: np.ndarray, ts: np.ndarray, addrs: np.ndarray,
               line: int, iters: dict[str, int]) -> None:
        """One load or store instruction: (block, thread, element) triples of the active threads."""
        if bs.size == 0:
            return
        tr = self._track(key, size)
        groups = self.group_of[ts]
        cell = bs * size + addrs
        now = self.epoch
        w_epoch, w_group = tr.w_epoch[cell], tr.w_group[cell]
        if kind == "load":
            hit = (w_epoch == now) & (w_group != groups)
            if hit.any():
                self._record("RAW", name, tr.w_line[cell][hit], line, bs[hit], ts[hit], addrs[hit], w_group[hit],
                             iters)
            if line not in tr.readers:
                tr.readers[line] = (self._full(size, -1), self._full(size, -1))
            r_epoch, r_group = tr.readers[line]
            fresh = r_epoch[cell] != now
            r_group[cell[fresh]] = -1
            r_epoch[cell] = now
            cur = r_group[cell]
            r_group[cell] = np.where(cur == -1, groups, np.where(cur == groups, cur, MULTI))
            several = self._several_groups(tr, cell, groups)
            if several is not None:  # two readers of different groups in this one instruction
                r_group[cell[several]] = MULTI
            return
        for load_line, (r_epoch, r_group) in tr.readers.items():
            old = r_group[cell]
            hit = (r_epoch[cell] == now) & (old != -1) & ((old == MULTI) | (old != groups))
            if hit.any():
                self._record("WAR", name, np.full(int(hit.sum()), load_line), line, bs[hit], ts[hit], addrs[hit],
                             old[hit], iters)
        hit = (w_epoch == now) & (w_group != groups) & (w_group >= 0)
        if hit.any():
            self._record("WAW", name, tr.w_line[cell][hit], line, bs[hit], ts[hit], addrs[hit], w_group[hit], iters)
        if self._several_groups(tr, cell, groups) is not None:  # several groups storing one element at once
            lo = np.full(tr.w_epoch.size, np.iinfo(np.int32).max, np.int32)
            hi = np.full(tr.w_epoch.size, -1, np.int32)
            np.minimum.at(lo, cell, groups)
            np.maximum.at(hi, cell, groups)
            clash = lo[cell] != hi[cell]
            self._record("WAW", name, np.full(int(clash.sum()), line), line, bs[clash], ts[clash], addrs[clash],
                         np.where(groups[clash] == lo[cell][clash], hi[cell][clash], lo[cell][clash]), iters)
        tr.w_epoch[cell] = now
        tr.w_group[cell] = groups
        tr.w_line[cell] = line

    @staticmethod
    def _several_groups(tr: _Track, cell: np.ndarray, groups: np.ndarray) -> np.ndarray | None:
        """Which accesses of one instruction meet an access of another group at their element
        (None: none do). One group's value per element wins the scratch write; an element that
        several groups access has an access whose group differs from the winner's."""
        tr.scratch[cell] = groups
        differ = tr.scratch[cell] != groups
        return differ if differ.any() else None

    def in_flight(self, name: str, pending: set[tuple[int, int]], copy_line: int, bs, ts, addrs, line: int,
                  iters: dict[str, int]) -> None:
        """A load of elements an async copy has not delivered yet (no `async_wait()` in between)."""
        hit = np.array([(int(b), int(a)) in pending for b, a in zip(bs, addrs)], bool)
        if hit.any():
            self._record("ASYNC", name, np.full(int(hit.sum()), copy_line), line, bs[hit], ts[hit], addrs[hit],
                         np.full(int(hit.sum()), -1), iters)

    def report(self) -> list[dict]:
        return [{"kind": r.kind, "buffer": r.buffer, "first_line": r.first_line, "second_line": r.second_line,
                 "count": r.count, "example": r.example} for r in sorted(self.races.values(),
                                                                         key=lambda r: (r.second_line, r.kind))]
