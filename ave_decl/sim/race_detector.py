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
    """One buffer's state, flat (block * size + element), as int32 words (epoch, group) (0: no
    access yet): the last store's, with its line beside it (read only when a race is found), and,
    per load line, that line's reads (group, or MULTI for several), so a WAR race is attributed
    to every load statement that read the element in the epoch, not only the last. Only words of
    the current epoch are ever compared. Loads only matter to a later store of the same epoch
    (WAR): they wait in `pending` and reach `readers` when one comes (most epochs of a staged
    kernel only load, or only store, a buffer)."""

    w: np.ndarray
    w_line: np.ndarray
    readers: dict[int, np.ndarray] = field(default_factory=dict)
    w_gen: int = 0  # the epoch number of the last store (words of other epochs are never compared)
    r_gen: dict[int, int] = field(default_factory=dict)  # per load line: the epoch of its words
    pending: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)  # (line, block rows, addresses, group field)
    pending_lanes: int = 0
    # this epoch's stores not yet written into w_line, as (line, cell): w_line is read only where a
    # word says "stored this epoch", so it is brought up to date only then (a barrier drops them)
    lines: list[tuple[int, np.ndarray]] = field(default_factory=list)
    lines_lanes: int = 0


_PENDING_LANES = 1 << 22  # loads held back at most (then applied): bounds their memory


class RaceDetector:
    """Per buffer, for every (block, element) flat (block * size + element): the last store as one
    int32 word (epoch, group) and its line, and per load line the readers as one word (epoch,
    group or MULTI). One small word per element and state means one random gather per access and
    state, where separate epoch and group arrays cost a cache miss each (the state spans
    megabytes at 1024^3, and its accesses are scattered across it)."""

    def __init__(self, blocks: int, threads: int, group_of: np.ndarray):
        self.B, self.T = blocks, threads
        self.group_of = group_of.astype(np.int32)  # thread -> ordering group
        self._eshift = (int(self.group_of.max(initial=0)) + 2).bit_length()  # a word: epoch << this | group + 2
        self._gmask = (1 << self._eshift) - 1
        # int32 words leave >= 2^19 epochs between fresh starts with <= 4094 groups (1024 threads)
        self._wtype = np.int32 if self._eshift <= 24 else np.int64
        self._max_gen = (1 << (8 * np.dtype(self._wtype).itemsize - 1 - self._eshift)) - 1
        self._code = (self.group_of + 2).astype(self._wtype)  # a word's group field: group + 2 (0: MULTI)
        self.epoch = 0
        self._gen = 1  # the current epoch's number in the words (0: never accessed)
        self.tracks: dict[int, _Track] = {}
        self._terms: dict[int, tuple[np.ndarray, ...]] = {}  # _lane_terms
        self.races: dict[tuple[str, str, int, int], Race] = {}

    def barrier(self) -> None:
        self.epoch += 1
        self._gen += 1
        for tr in self.tracks.values():  # loads of the closed epoch can no longer race, nor its stores' lines be read
            tr.pending.clear()
            tr.pending_lanes = 0
            tr.lines.clear()
            tr.lines_lanes = 0
        if self._gen > self._max_gen:  # only the current epoch's words are ever compared: start afresh
            for tr in self.tracks.values():
                tr.w.fill(0)
                for r in tr.readers.values():
                    r.fill(0)
            self._gen = 1

    def _track(self, key: int, size: int) -> _Track:
        if key not in self.tracks:
            self.tracks[key] = _Track(np.zeros(self.B * size, self._wtype), np.zeros(self.B * size, np.int32))
        return self.tracks[key]

    def _lane_terms(self, bs: np.ndarray, ts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Each access's block row (block * size) and group field. Accesses of every lane pass the
        same block and thread arrays every time: their terms are kept (by identity) per size."""
        kept = self._terms.get(size)
        if kept is not None and kept[0] is bs and kept[1] is ts:
            return kept[2], kept[3]
        rows, code = bs * size, self._code[ts]
        if bs.size == self.B * self.T:
            self._terms[size] = (bs, ts, rows, code)
        return rows, code

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
               line: int, iters: dict[str, int], cells: np.ndarray | None = None, distinct: bool = False) -> None:
        """One load or store instruction: (block, thread, element) triples of the active threads.
        A store may bring its flat cells (block * size + element) and whether they are `distinct`
        (no two lanes write one element: no scatter can then hide another group's store)."""
        if bs.size == 0:
            return
        tr = self._track(key, size)
        rows, code = self._lane_terms(bs, ts, size)
        base = self._wtype(self._gen << self._eshift)
        gmask = self._gmask
        if kind == "load":
            if tr.w_gen == self._gen:  # a store of this epoch: a RAW race is possible
                cell = rows + addrs
                w = tr.w[cell]
                hit = (w >= base) & ((w & gmask) != code)  # stored this epoch by another group
                if hit.any():
                    self._record("RAW", name, self._lines(tr)[cell[hit]], line, bs[hit], ts[hit], addrs[hit],
                                 (w[hit] & gmask) - 2, iters)
            if line not in tr.readers:  # WAR records follow the order in which load lines first appear
                tr.readers[line] = np.zeros(tr.w.size, self._wtype)
            tr.pending.append((line, rows, addrs, code))  # the cells are computed if a store needs them
            tr.pending_lanes += addrs.size
            if tr.pending_lanes > _PENDING_LANES:
                self._apply_loads(tr)
            return
        cell = rows + addrs if cells is None else cells
        self._apply_loads(tr)
        mine = base | code
        for load_line, readers in tr.readers.items():
            if tr.r_gen.get(load_line) != self._gen:  # not read in this epoch
                continue
            old = readers[cell]
            hit = (old >= base) & (old != mine)  # read this epoch by another group, or by several
            if hit.any():
                self._record("WAR", name, np.full(int(hit.sum()), load_line), line, bs[hit], ts[hit], addrs[hit],
                             (old[hit] & gmask) - 2, iters)
        if tr.w_gen == self._gen:
            w = tr.w[cell]
            hit = (w >= base) & ((w & gmask) != code)
            if hit.any():
                self._record("WAW", name, self._lines(tr)[cell[hit]], line, bs[hit], ts[hit], addrs[hit],
                             (w[hit] & gmask) - 2, iters)
        tr.w_gen = self._gen
        tr.w[cell] = mine
        tr.lines.append((line, cell))
        tr.lines_lanes += cell.size
        if tr.lines_lanes > _PENDING_LANES:
            self._lines(tr)
        # another group's store to one element won the scatter: several groups at once
        if not distinct and (tr.w[cell] != mine).any():
            groups = self.group_of[ts]
            lo = np.full(tr.w.size, np.iinfo(np.int32).max, np.int32)
            hi = np.full(tr.w.size, -1, np.int32)
            np.minimum.at(lo, cell, groups)
            np.maximum.at(hi, cell, groups)
            clash = lo[cell] != hi[cell]
            self._record("WAW", name, np.full(int(clash.sum()), line), line, bs[clash], ts[clash], addrs[clash],
                         np.where(groups[clash] == lo[cell][clash], hi[cell][clash], lo[cell][clash]), iters)

    @staticmethod
    def _lines(tr: _Track) -> np.ndarray:
        """w_line with this epoch's stores written in, in order (the last store of an element wins)."""
        for line, cell in tr.lines:
            tr.w_line[cell] = line
        tr.lines.clear()
        tr.lines_lanes = 0
        return tr.w_line

    def _apply_loads(self, tr: _Track) -> None:
        """The held-back loads of this epoch, in order, into their lines' reader words: the first
        reader group of an element in the epoch, or MULTI once a second group reads it."""
        base = self._wtype(self._gen << self._eshift)
        for line, rows, addrs, code in tr.pending:
            cell = rows + addrs
            readers = tr.readers[line]
            if tr.r_gen.get(line) != self._gen:
                tr.r_gen[line] = self._gen
            mine = base | code
            cur = readers[cell]
            new = np.where((cur < base) | (cur == mine), mine, base)
            readers[cell] = new
            several = readers[cell] != new  # two lanes of different groups read one element in this instruction
            if several.any():
                readers[cell[several]] = base
        tr.pending.clear()
        tr.pending_lanes = 0

    def in_flight(self, name: str, pending_bs: np.ndarray, pending_addrs: np.ndarray, copy_line: int, bs, ts,
                  addrs, line: int, iters: dict[str, int]) -> None:
        """A load of elements an async copy has not delivered yet (no `async_wait()` in between):
        the (block, element) pairs of the load that the copy's pairs hold (addresses are in bounds, >= 0)."""
        hit = np.isin(np.asarray(bs, np.int64) << 32 | np.asarray(addrs, np.int64),
                      np.asarray(pending_bs, np.int64) << 32 | np.asarray(pending_addrs, np.int64))
        if hit.any():
            self._record("ASYNC", name, np.full(int(hit.sum()), copy_line), line, bs[hit], ts[hit], addrs[hit],
                         np.full(int(hit.sum()), -1), iters)

    def report(self) -> list[dict]:
        return [{"kind": r.kind, "buffer": r.buffer, "first_line": r.first_line, "second_line": r.second_line,
                 "count": r.count, "example": r.example} for r in sorted(self.races.values(),
                                                                         key=lambda r: (r.second_line, r.kind))]
