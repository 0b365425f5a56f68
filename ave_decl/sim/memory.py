"""Memory of the simulator: addressing, loads and stores, bounds, races, async copies (mixed into Simulator)."""
from __future__ import annotations

import numpy as np

from ..lang import ast as A
from .state import ITYPE, LMAX, ROUND, Buf, Data, Failure, masked_of, narrow


class ArrayMemo:
    """Values computed from read-only arrays, keyed by those arrays' ids. Each entry keeps its
    source objects alive, so an id in a key is never reused while the entry exists; the sources
    must never be written in place (eval's kept values and constant broadcasts are read-only).
    At most `budget` bytes of values, the least recently used entry going first; a key is kept
    only when it misses a second time, so the addresses of an outer loop's fresh indices (a GEMM's
    global loads at each K tile, never repeated) do not push out those an inner loop reuses."""

    def __init__(self, budget: int):
        self.budget = budget
        self.used = 0
        self.entries: dict[tuple, tuple[tuple, tuple[np.ndarray, ...], int]] = {}
        self.seen: set[tuple] = set()  # keys that missed once (a reused id only admits early)

    def get(self, key: tuple) -> tuple[np.ndarray, ...] | None:
        hit = self.entries.pop(key, None)
        if hit is None:
            return None
        self.entries[key] = hit  # most recently used: last in the dict's order
        return hit[1]

    def admits(self, key: tuple) -> bool:
        """Whether `put` would keep this key now (it missed before): a value only an entry needs
        may be computed for it then and not on a first miss."""
        return key in self.seen

    def put(self, key: tuple, sources: tuple, values: tuple[np.ndarray, ...]) -> None:
        if key not in self.seen:
            if len(self.seen) >= 1 << 16:
                self.seen.clear()
            self.seen.add(key)
            return
        size = sum(v.nbytes for v in values)
        if size > self.budget:
            return
        if key in self.entries:  # put again: replaced, not counted twice
            self.used -= self.entries.pop(key)[2]
        while self.entries and self.used + size > self.budget:
            self.used -= self.entries.pop(next(iter(self.entries)))[2]
        for v in values:
            v.flags.writeable = False  # shared by later accesses: nobody may write it in place
        self.entries[key] = (sources, values, size)
        self.used += size


class MemoryModel:
    """Memory of the simulator: addressing, loads and stores, bounds, races, async copies."""

    def _async_copy(self, e: A.Call, s) -> None:
        """Read the source now; the data lands in shared memory at the issuing threads' next
        `async_wait()` (the latest moment the hardware may deliver it), so a read before the wait
        sees the old contents and is recorded as an ASYNC race."""
        dst, src = e.args
        data = self.eval(src)
        buf = self.env[dst.value.id]  # type: ignore[union-attr]
        idx = [self._index(i) for i in dst.indices]  # type: ignore[union-attr]
        if self.async_land == "issue":
            return self._store(buf, idx, data, s)
        # the copy belongs to the issuing thread's open group: the number of groups it committed so far
        self.pending.append((buf, idx, data, s, self.active, self.committed))

    def _commit_copies(self) -> None:
        """`async_commit()`: each active thread closes its open group (cp.async.commit_group)."""
        self.committed = self.committed + np.asarray(self.active, ITYPE)

    def _land_copies(self, leave: int | None = None) -> None:
        """`async_wait()` (leave None): every copy of the active threads lands. `async_wait(n)`: the
        copies of every committed group but the n most recent land (cp.async.wait_group n; copies
        of a group not yet committed stay in flight)."""
        pending, self.pending = self.pending, []
        saved = self.active
        for buf, idx, data, s, active, group in pending:
            due = active & saved if leave is None else active & saved & (group < self.committed - leave)
            self.active = due
            self._store(buf, idx, data, s)
            rest = active & ~due
            if bool(np.any(rest)):  # copies of threads that did not wait (or whose group is recent) stay in flight
                self.pending.append((buf, idx, data, s, rest, group))
        self.active = saved

    def _merge(self, new: Data, old: Data) -> Data:
        m = self.active
        masked = None
        if new.masked is not None or old.masked is not None:
            masked = np.where(m, masked_of(new), masked_of(old))
        return Data(np.where(m, new.v, old.v), np.where(m[..., None], new.tag, old.tag),
                    np.where(m, new.arity, old.arity), masked)

    # ------------------------------------------------------------ memory
    def _flat(self, buf: Buf, idx: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Linear (physical) address and an in-bounds mask. A uniform index (a register slot named
        by a constant) is computed once and broadcast, not once per lane."""
        idx = [np.asarray(c) for c in idx]
        if idx and all(c.shape == self.shape and not any(c.strides) for c in idx):
            addr, ok = self._flat_lanes(buf, [c.reshape(-1)[:1] for c in idx])
            return np.broadcast_to(addr.reshape(()), self.shape), np.broadcast_to(ok.reshape(()), self.shape)
        if not all(c.flags.writeable is False for c in idx):  # a fresh index (data-dependent): not kept
            return self._flat_lanes(buf, idx)
        # index arrays kept by eval (read-only, reused while their names' values come back): the
        # same access in a later iteration of an outer loop has the same addresses
        key = (id(buf), *map(id, idx))
        hit = self.addresses.get(key)
        if hit is None:
            hit = self._flat_lanes(buf, idx)
            self.addresses.put(key, (buf, *idx), hit)
        return hit  # type: ignore[return-value]

    def _flat_lanes(self, buf: Buf, idx: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        ok = None
        for c, extent in zip(idx, buf.shape):  # one unsigned comparison is 0 <= c < extent for int32
            inside = c.view(np.uint32) < extent if c.dtype == ITYPE else (c >= 0) & (c < extent)
            ok = inside if ok is None else ok & inside
        if ok is None:
            ok = np.ones(idx[0].shape if idx else self.shape, bool)
        if buf.layout is not None:
            return np.asarray(buf.layout.evaluate(*idx), ITYPE), ok
        addr = None
        for c, extent in zip(idx, buf.shape):
            addr = c if addr is None else addr * extent + c
        return (addr if addr is not None else np.zeros(ok.shape, ITYPE)), ok

    def _oob(self, buf: Buf, ok: np.ndarray, s, every: bool = False) -> None:
        """Report the first out-of-bounds access (`every`: ok holds everywhere, nothing to report)."""
        if every and self.probe is None:
            return
        bad = np.asarray(self.active & ~ok)
        if bad.any():
            b, t = (int(x) for x in np.argwhere(bad)[0])
            self.errors.append(f"line {s.span.line}: out-of-bounds access to {buf.name} by block "
                               f"{self.block_ids[b]}, thread {t}{self._iters()}")
        self._probe(s, {}, oob=bad)

    def _lanes(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(block, thread, lane) indices of the lanes where `mask` holds, in row-major order (as
        np.nonzero gives them, so later stores to one element win); the lane is block * T + thread."""
        if mask.all():
            return self.all_blocks, self.all_threads, self.all_lanes
        lanes = np.flatnonzero(mask)
        return lanes // self.T, lanes % self.T, lanes

    def _pick(self, x: np.ndarray, lanes: np.ndarray) -> np.ndarray:
        """x's values at `lanes` (flat); with every lane, x itself flattened (no gather)."""
        return x.reshape(-1) if lanes is self.all_lanes else x.reshape(-1)[lanes]

    def _cells(self, buf: Buf, safe: np.ndarray) -> np.ndarray:
        """Each (block, thread)'s element of a shared or local buffer, as an index into its flat storage."""
        rows = self.block_rows if buf.space == "shared" else self.lane_rows
        if safe.flags.writeable or not any(safe.strides):  # fresh, or a uniform index's broadcast (made anew)
            return rows * buf.size + safe
        key = ("cells", buf.space, buf.size, id(safe))  # a kept address (_flat): its cells are kept too
        hit = self.addresses.get(key)
        if hit is None:
            hit = (rows * buf.size + safe,)
            self.addresses.put(key, (safe,), hit)
        return hit[0]

    def load(self, buf: Buf, idx: list[np.ndarray], node) -> Data:
        addr, ok = self._flat(buf, idx)
        every = bool(ok.all())  # the usual case: no lane to mask
        self._oob(buf, ok, node, every)
        if buf.data.size == 0:  # a zero-size tensor or array: every access is out of bounds (reported above)
            return Data(np.zeros(self.shape, np.float32), np.zeros(self.shape + (LMAX,), ITYPE),
                        np.zeros(self.shape, ITYPE))
        safe = addr if every else np.where(ok, addr, 0)
        cell = safe if buf.space == "global" else self._cells(buf, safe)
        v = np.take(buf.data, cell)
        if not every:
            v = np.where(ok, v, np.float32(0))
        if buf.space == "shared":
            self._race_check(buf, "load", ok, addr, node)
        if not self.shadow:  # without shadow checks no tag is ever read (nor stored, nor asserted)
            tag, arity = self._no_tags()
        elif buf.tag_fn is not None and buf.space != "local" and not buf.moving:  # a register tag (and a
            # moving subview's, rules/provenance.dl) is a claim checked at stores: loads read what was stored
            tag, arity = self._tag_of(buf, idx)
        elif buf.space == "global":
            tag, arity = np.zeros(self.shape + (LMAX,), ITYPE), np.zeros(self.shape, ITYPE)
        else:
            tag, arity = np.take(buf.tag.reshape(-1, LMAX), cell, axis=0), np.take(buf.arity, cell)  # type: ignore[union-attr]
        masked = None
        if buf.masked is not None:
            masked = np.take(buf.masked, cell)
        exact = buf.dtype if buf.dtype in ROUND else None  # what every narrow buffer holds (state.Data.exact)
        return Data(v, tag, arity if every else np.where(ok, arity, 0), masked, exact)

    def _no_tags(self) -> tuple[np.ndarray, np.ndarray]:
        """Top tags and arities of every lane, read-only broadcasts made once: a load without
        shadow checks needs them only to build its Data, and zeroing 24 bytes per lane per load
        was a tenth of a 1024^3 GEMM's loads."""
        key = ("no tags", self.shape)
        kept = self.constants.get(key)  # type: ignore[call-overload]
        if kept is None:
            kept = self.constants[key] = (np.broadcast_to(np.zeros((), ITYPE), self.shape + (LMAX,)),  # type: ignore[index]
                                          np.broadcast_to(np.zeros((), ITYPE), self.shape))
        return kept

    def _race_check(self, buf: Buf, kind: str, ok, addr, node) -> None:
        bs, ts, lanes = self._lanes(self.active & ok)
        addrs = self._pick(addr, lanes)
        for pbuf, pidx, _d, ps, pact, _group in self.pending:
            if pbuf is buf:
                paddr, pok = self._flat(buf, pidx)
                pb, pt = np.nonzero(np.asarray(pact & pok))
                self.races.in_flight(buf.name, pb, np.asarray(paddr)[pb, pt], ps.span.line, bs, ts, addrs,
                                     node.span.line, self.loop_vars)
        root = buf.storage or buf  # the aliases of one storage race with each other
        self.races.access(id(root), root.name, root.size, kind, bs, ts, addrs, node.span.line, self.loop_vars)

    def _foreign_store(self, buf: Buf, root: Buf, addr: np.ndarray, ok: np.ndarray, s) -> None:
        """ave/shared-round-trip across aliases: a store through one alias must not land in another,
        tagged, subview of the storage (what that subview's tag claims)."""
        if not self.shadow:
            return
        for view in root.views:
            if view is buf or view.tag_fn is None:
                continue
            lo = view.layout.base  # type: ignore[union-attr]
            hi = lo + view.layout.size  # type: ignore[union-attr]
            # out of the alias's own bounds too: the hardware writes the storage address regardless
            inside = self.active & (addr >= lo) & (addr < hi)
            key = ("ave/shared-round-trip", s.span.line)
            f = self.failures.setdefault(key, Failure(key[0], key[1], 0, 0, {}))
            f.checked += int(np.sum(self.active & ok))
            n = int(np.sum(inside))
            if n and not f.failed:
                b, t = (int(x) for x in np.argwhere(inside)[0])
                f.first = {"block": list(self.block_ids[b]), "thread": t, "address": int(addr[b, t]),
                           "view": view.name, "iterations": dict(self.loop_vars)}
            f.failed += n

    def _store(self, buf: Buf, idx: list[np.ndarray], data: Data, s) -> None:
        addr, ok = self._flat(buf, idx)
        self._oob(buf, ok, s, bool(ok.all()))
        if buf.tag_fn is not None and self.shadow:
            self._check_stored_tag(buf, idx, data, s)
        bs, ts, lanes = self._lanes(self.active & ok)
        a = self._pick(addr, lanes)
        vals = self._pick(data.v, lanes)
        slot = self._slot_of(buf, addr, lanes)
        if buf.dtype in ROUND and data.exact != buf.dtype:  # the storage holds fewer bits: the hardware rounds
            vals = narrow(np.asarray(vals, np.float32), buf.dtype)
        distinct = False
        if buf.space == "global":
            cell = a
            np.add.at(self.write_counts.setdefault(buf.name, np.zeros(buf.size, np.int64)), a, 1)
            buf.written = True
        elif buf.space == "shared":
            cell, distinct = self._shared_cells(buf, addr, bs, a, lanes)
        else:
            cell = lanes * buf.size + a
        if buf.space == "shared":
            root = buf.storage or buf
            self.races.access(id(root), root.name, root.size, "store", bs, ts, a, s.span.line, self.loop_vars,
                              cells=cell if root is buf else None, distinct=distinct and root is buf)
            if root.views:
                self._foreign_store(buf, root, addr, ok, s)
        buf.data = _contiguous(buf.data)
        self._put(buf.data.reshape(-1), cell, slot, vals)
        if buf.space == "global" or not self.shadow:  # global tags come from tag functions; values never read tags
            return
        if data.masked is not None or buf.masked is not None:
            if buf.masked is None:
                buf.masked = np.zeros(buf.arity.shape, bool)  # type: ignore[union-attr]
            mk = self._pick(data.masked, lanes) if data.masked is not None else False
            buf.masked = _contiguous(buf.masked)
            self._put(buf.masked.reshape(-1), cell, slot, mk)
        buf.tag, buf.arity = _contiguous(buf.tag), _contiguous(buf.arity)  # type: ignore[arg-type]
        self._put(_rows(buf.tag), cell, slot, self._pick(_rows(np.ascontiguousarray(data.tag)), lanes))
        self._put(buf.arity.reshape(-1), cell, slot, self._pick(data.arity, lanes))

    def _shared_cells(self, buf: Buf, addr: np.ndarray, bs: np.ndarray, a: np.ndarray,
                      lanes: np.ndarray) -> tuple[np.ndarray, bool]:
        """A shared store's cells (block * size + address, flat) and whether no two lanes write one
        element (then the race detector need not read its scatter back to find two groups' stores
        to one element). A store of every lane through a kept address (`_flat`: the staging stores
        of every K tile) keeps both, so each is computed once, not once per tile."""
        if lanes is not self.all_lanes or addr.flags.writeable or not any(addr.strides):
            return bs * buf.size + a, False
        key = ("store cells", buf.size, id(addr))
        hit = self.addresses.get(key)
        if hit is not None:
            return hit[0], bool(hit[1])
        cell = bs * buf.size + a
        distinct = self.addresses.admits(key) and _distinct(cell, self.B * buf.size)
        self.addresses.put(key, (addr,), (cell, np.asarray(distinct)))
        return cell, distinct

    def _slot_of(self, buf: Buf, addr: np.ndarray, lanes: np.ndarray) -> int | None:
        """The register slot every lane stores to (`a[v] = ...` of a local array with a uniform
        index, every lane active and in bounds), or None: such a store writes one strided column
        of the (B, T, slots) storage instead of scattering to B * T computed cells."""
        if buf.space != "local" or lanes is not self.all_lanes or addr.shape != self.shape or any(addr.strides):
            return None
        return int(addr.reshape(-1)[0])

    def _put(self, flat: np.ndarray, cell: np.ndarray, slot: int | None, vals) -> None:
        """flat[cell] = vals; with a slot (_slot_of: cell is lane * slots + slot for every lane in
        order) the same writes as one column of the (B * T, slots) view."""
        if slot is None:
            flat[cell] = vals
        else:
            flat.reshape(self.B * self.T, -1)[:, slot] = vals


def _distinct(cells: np.ndarray, extent: int) -> bool:
    """Whether no cell in [0, extent) occurs twice."""
    seen = np.zeros(extent, bool)
    seen[cells] = True
    return int(np.count_nonzero(seen)) == cells.size


def _contiguous(a: np.ndarray) -> np.ndarray:
    """`a` in C order, so that reshape(-1) is a view and writes through it reach the buffer."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


_TAG_ROW = np.dtype((np.void, LMAX * np.dtype(ITYPE).itemsize))


def _rows(tag: np.ndarray) -> np.ndarray:
    """A C-ordered tag array's LMAX components as one opaque item per element (a view): numpy
    gathers and scatters whole items several times faster than (n, LMAX) rows."""
    return tag.view(_TAG_ROW).reshape(-1)
