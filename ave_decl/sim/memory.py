"""Memory of the simulator: addressing, loads and stores, bounds, races, async copies (mixed into Simulator)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..lang import ast as A
from .state import ITYPE, LMAX, Buf, Data, masked_of


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
        self.committed = self.committed + jnp.asarray(self.active, ITYPE)

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
            if bool(jnp.any(rest)):  # copies of threads that did not wait (or whose group is recent) stay in flight
                self.pending.append((buf, idx, data, s, rest, group))
        self.active = saved

    def _merge(self, new: Data, old: Data) -> Data:
        m = self.active
        masked = None
        if new.masked is not None or old.masked is not None:
            masked = jnp.where(m, masked_of(new), masked_of(old))
        return Data(jnp.where(m, new.v, old.v), jnp.where(m[..., None], new.tag, old.tag),
                    jnp.where(m, new.arity, old.arity), masked)

    # ------------------------------------------------------------ memory
    def _flat(self, buf: Buf, idx: list[jnp.ndarray]) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Linear (physical) address and an in-bounds mask."""
        ok = jnp.ones(self.shape, bool)
        for c, extent in zip(idx, buf.shape):
            ok = ok & (c >= 0) & (c < extent)
        if buf.layout is not None:
            addr = jnp.asarray(buf.layout.evaluate(*[np.asarray(c) for c in idx]), ITYPE)
        else:
            addr = jnp.zeros(self.shape, ITYPE)
            for c, extent in zip(idx, buf.shape):
                addr = addr * extent + c
        return addr, ok

    def _oob(self, buf: Buf, ok: jnp.ndarray, s) -> None:
        bad = np.asarray(self.active & ~ok)
        if bad.any():
            b, t = (int(x) for x in np.argwhere(bad)[0])
            self.errors.append(f"line {s.span.line}: out-of-bounds access to {buf.name} by block "
                               f"{self.block_ids[b]}, thread {t}{self._iters()}")
        self._probe(s, {}, oob=bad)

    def load(self, buf: Buf, idx: list[jnp.ndarray], node) -> Data:
        addr, ok = self._flat(buf, idx)
        self._oob(buf, ok, node)
        safe = jnp.where(ok, addr, 0)
        b = jnp.arange(self.B)[:, None]
        if buf.space == "global":
            v = buf.data.reshape(-1)[safe]
        elif buf.space == "shared":
            v = buf.data[b, safe]
            self._race_check(buf, "load", ok, addr, node)
        else:
            v = buf.data[b, jnp.arange(self.T)[None, :], safe]
        v = jnp.where(ok, v, 0.0)
        if buf.tag_fn is not None:
            tag, arity = self._tag_of(buf, idx)
        elif buf.space == "global":
            tag, arity = jnp.zeros(self.shape + (LMAX,), ITYPE), jnp.zeros(self.shape, ITYPE)
        elif buf.space == "shared":
            tag, arity = buf.tag[b, safe], buf.arity[b, safe]  # type: ignore[index]
        else:
            t = jnp.arange(self.T)[None, :]
            tag, arity = buf.tag[b, t, safe], buf.arity[b, t, safe]  # type: ignore[index]
        masked = None
        if buf.masked is not None:
            masked = buf.masked[b, safe] if buf.space == "shared" else buf.masked[b, jnp.arange(self.T)[None, :], safe]
        return Data(v, tag, jnp.where(ok, arity, 0), masked)

    def _race_check(self, buf: Buf, kind: str, ok, addr, node) -> None:
        bs, ts = np.nonzero(np.asarray(self.active & ok))
        for pbuf, pidx, _d, ps, pact, _group in self.pending:
            if pbuf is buf:
                paddr, pok = self._flat(buf, pidx)
                pb, pt = np.nonzero(np.asarray(pact & pok))
                self.races.in_flight(buf.name, set(zip(pb.tolist(), np.asarray(paddr)[pb, pt].tolist())),
                                     ps.span.line, bs, ts, np.asarray(addr)[bs, ts], node.span.line, self.loop_vars)
        self.races.access(id(buf), buf.name, buf.size, kind, bs, ts, np.asarray(addr)[bs, ts].astype(np.int64),
                          node.span.line, self.loop_vars)

    def _store(self, buf: Buf, idx: list[jnp.ndarray], data: Data, s) -> None:
        addr, ok = self._flat(buf, idx)
        self._oob(buf, ok, s)
        if buf.tag_fn is not None and self.shadow and buf.space != "local":
            self._check_stored_tag(buf, idx, data, s)
        m = np.asarray(self.active & ok)
        bs, ts = np.nonzero(m)
        a = np.asarray(addr)[bs, ts]
        vals = jnp.asarray(np.asarray(data.v)[bs, ts])
        if buf.space == "global":
            counts = self.write_counts.setdefault(buf.name, np.zeros(buf.size, np.int64))
            np.add.at(counts, a, 1)
            flat = buf.data.reshape(-1).at[a].set(vals)
            buf.data = flat.reshape(buf.data.shape)
            buf.written = True
            return
        tags, ar = np.asarray(data.tag)[bs, ts], np.asarray(data.arity)[bs, ts]
        if data.masked is not None or buf.masked is not None:
            if buf.masked is None:
                buf.masked = jnp.zeros(buf.arity.shape, bool)  # type: ignore[union-attr]
            mk = np.asarray(data.masked)[bs, ts] if data.masked is not None else np.zeros(len(bs), bool)
            at = (bs, a) if buf.space == "shared" else (bs, ts, a)
            buf.masked = buf.masked.at[at].set(mk)
        if buf.space == "shared":
            self.races.access(id(buf), buf.name, buf.size, "store", bs, ts, a.astype(np.int64), s.span.line,
                              self.loop_vars)
            buf.data = buf.data.at[bs, a].set(vals)
            buf.tag = buf.tag.at[bs, a].set(tags)  # type: ignore[union-attr]
            buf.arity = buf.arity.at[bs, a].set(ar)  # type: ignore[union-attr]
        else:
            buf.data = buf.data.at[bs, ts, a].set(vals)
            buf.tag = buf.tag.at[bs, ts, a].set(tags)  # type: ignore[union-attr]
            buf.arity = buf.arity.at[bs, ts, a].set(ar)  # type: ignore[union-attr]
