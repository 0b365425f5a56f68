"""Memory of the simulator: addressing, loads and stores, bounds, races, async copies (mixed into Simulator)."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..lang import ast as A
from .state import ITYPE, LMAX, Buf, Data


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
        self.pending.append((buf, idx, data, s, self.active))

    def _land_copies(self) -> None:
        pending, self.pending = self.pending, []
        saved = self.active
        for buf, idx, data, s, active in pending:
            self.active = active & saved
            self._store(buf, idx, data, s)
        self.active = saved
        # copies of threads that did not wait stay in flight
        self.pending = [(b, i, d, s, a & ~saved) for b, i, d, s, a in pending if bool(jnp.any(a & ~saved))]

    def _merge(self, new: Data, old: Data) -> Data:
        m = self.active
        return Data(jnp.where(m, new.v, old.v), jnp.where(m[..., None], new.tag, old.tag),
                    jnp.where(m, new.arity, old.arity))

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
        return Data(v, tag, jnp.where(ok, arity, 0))

    def _race_check(self, buf: Buf, kind: str, ok, addr, node) -> None:
        bs, ts = np.nonzero(np.asarray(self.active & ok))
        for pbuf, pidx, _d, ps, pact in self.pending:
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
