"""Shadow checks of the simulator: stored tags, assertions, K pairing, probes (mixed into Simulator)."""
from __future__ import annotations

import numpy as np

from ..hw.instructions import Instruction
from ..lang import ast as A
from .statistics import without_position
from .state import ITYPE, LMAX, ZERO_MARK, Buf, Data, Failure, is_zero, merge_classes, tag_list


class ShadowChecks:
    """Shadow checks of the simulator: stored tags, assertions, K pairing, probes."""

    def _check_stored_tag(self, buf: Buf, idx: list[np.ndarray], data: Data, s) -> None:
        """A store into a tagged buffer must store the element the tag names (ave/epilogue-placement,
        ave/shared-round-trip, ave/register-round-trip)."""
        want, want_ar = self._tag_of(buf, idx)
        # a row statistic (negative arity) stored where its row's tag is wanted is that element, as
        # on the static side (stored_tag compares the components)
        holds = (np.abs(data.arity) == want_ar) & np.all(without_position(data.tag, data.arity) == want, axis=-1)
        inv = {"global": "ave/epilogue-placement", "shared": "ave/shared-round-trip"}.get(buf.space,
                                                                                         "ave/register-round-trip")
        self._record(inv, s, holds[..., None], data.tag[:, :, None], data.arity[..., None], want[:, :, None],
                     want_ar[..., None])

    def _tag_of(self, buf: Buf, idx: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        lam, captured = buf.tag_fn  # type: ignore[misc]
        saved = self.env
        self.env = dict(captured)
        for p, c in zip(lam.params, idx):
            self.env[p] = c
        body = lam.body.elts if isinstance(lam.body, A.Tuple) else (lam.body,)
        comps = [self._index(c) for c in body]
        self.env = saved
        tag = np.stack(comps + [np.zeros(self.shape, ITYPE)] * (LMAX - len(comps)), axis=-1)
        return tag, np.full(self.shape, len(comps), ITYPE)

    def _assert(self, e: A.Call, s) -> None:
        if not self.shadow:
            return
        _, lt, la = self._operand(e.args[0])
        _, rt, ra = self._operand(e.args[1])
        if e.func_name == "assert_tag_eq":
            holds = (la == ra) & np.all(lt == rt, axis=-1) & (la > 0)
        else:
            holds = self._relation(e.args[2], lt, la, rt, ra)
        self._record("ave/tag-assert", s, holds, lt, la, rt, ra)

    def _assert_mask(self, e: A.Call, s) -> None:
        """assert_mask(x, lambda t: ...): a tagged element of x is kept (no select masked it off)
        exactly when the predicate holds for its tag (ave/masked-flow)."""
        if not self.shadow:
            return
        _, lt, la = self._operand(e.args[0])
        masked = self._operand_masked(e.args[0], la.shape)
        holds = (self._relation(e.args[1], lt, la, lt, la) == ~masked) | (la <= 0)
        self._record("ave/masked-flow", s, holds, lt, la, lt, la, extra={"masked": masked})

    def _operand_masked(self, e: A.Expr, shape) -> np.ndarray:
        if isinstance(e, A.Name) and isinstance(self.env.get(e.id), Buf):
            m = self.env[e.id].masked
        else:
            d = self.eval(e)
            m = None if d.masked is None else d.masked[..., None]
        return np.zeros(shape, bool) if m is None else np.broadcast_to(m, shape)

    def _relation(self, lam: A.Lambda, lt, la, rt, ra) -> np.ndarray:
        names = dict(zip(lam.params, [(lt, la), (rt, ra)]))

        def go(x: A.Expr):
            if isinstance(x, A.Subscript) and isinstance(x.value, A.Name) and x.value.id in names:
                tag, arity = names[x.value.id]
                i = x.indices[0]
                k = int(self._const(i)) if not (isinstance(i, A.UnaryOp) and i.op == "-") else \
                    -int(self._const(i.operand))
                pos = np.where(k < 0, arity + k, k)
                return np.take_along_axis(tag, np.clip(pos, 0, LMAX - 1)[..., None], axis=-1)[..., 0]
            if isinstance(x, A.BinOp):
                return self._binop(x.op, go(x.left), go(x.right))
            if isinstance(x, A.BoolOp):
                vals = [np.asarray(go(v)) != 0 for v in x.values]
                out = vals[0]
                for v in vals[1:]:
                    out = (out & v) if x.op == "and" else (out | v)
                return out
            if isinstance(x, A.UnaryOp):
                inner = go(x.operand)
                return (inner == 0) if x.op == "not" else -inner
            v = self.eval(x)
            return np.asarray(v.v.astype(ITYPE) if isinstance(v, Data) else v)[..., None]

        return (np.asarray(go(lam.body)) != 0) & (la > 0) & (ra > 0)

    def _record(self, inv: str, s, holds, lt, la, rt, ra, source: str = "", extra: dict | None = None) -> None:
        act = self.active[..., None] & np.ones(holds.shape, bool)
        bad = np.asarray(act & ~holds)
        key = (inv, s.span.line)
        f = self.failures.setdefault(key, Failure(inv, s.span.line, 0, 0, {}))
        f.checked += int(np.asarray(act).sum())
        n = int(bad.sum())
        if n:
            where = np.argwhere(bad)
            merge_classes(f.classes, {"lanes": where[:, 1] % self.group, "value_index": where[:, 2]})
        if n and not f.failed:
            b, t, slot = (int(x) for x in np.argwhere(bad)[0])
            f.first = {"block": list(self.block_ids[b]), "thread": t, "lane": t % self.group,
                       "iterations": dict(self.loop_vars), "value_index": slot,
                       "lhs_tag": tag_list(lt[b, t, slot], la[b, t, slot]),
                       "rhs_tag": tag_list(rt[b, t, slot], ra[b, t, slot])}
        f.failed += n
        self._probe(s, {"lhs": (lt, la), "rhs": (rt, ra)}, source=source, extra=extra)

    def _probe(self, s, operands: dict, oob: np.ndarray | None = None, source: str = "",
               extra: dict | None = None) -> None:
        """Keep what meets at a statement for a replay (only the requested line and iterations)."""
        p = self.probe
        if p is None or p.get("line") != s.span.line:
            return
        if any(self.loop_vars.get(k) != v for k, v in p.get("iterations", {}).items()):
            return
        self.probes.append({"line": s.span.line, "iterations": dict(self.loop_vars), "oob": oob, "source": source,
                            "operands": {k: (np.array(t), np.array(a)) for k, (t, a) in operands.items()},
                            "extra": {k: np.array(v) for k, v in (extra or {}).items()}})

    def _mma_shadow(self, instr: Instruction, a: Buf, b: Buf, c: Buf, out: Buf, keep, s, maps, W: int) -> None:
        ar, ac, br, bc, cr, cc = maps
        g = instr.group_size
        at = a.tag.reshape(self.B, W, g, -1, LMAX)  # type: ignore[union-attr]
        aa = a.arity.reshape(self.B, W, g, -1)  # type: ignore[union-attr]
        bt = b.tag.reshape(self.B, W, g, -1, LMAX)  # type: ignore[union-attr]
        ba = b.arity.reshape(self.B, W, g, -1)  # type: ignore[union-attr]
        # slot (lane, v) holding A[i, k] / B[k, j]
        a_slot = np.zeros((instr.m, instr.k, 2), int)
        a_slot[ar, ac] = np.stack(np.meshgrid(np.arange(g), np.arange(instr.a.values), indexing="ij"), -1)
        b_slot = np.zeros((instr.k, instr.n, 2), int)
        b_slot[br, bc] = np.stack(np.meshgrid(np.arange(g), np.arange(instr.b.values), indexing="ij"), -1)
        # per slot first (K components, zero marks), then spread to (i, k) / (k, j): no (M, K, LMAX) tag copies
        a_lin = a_slot[..., 0] * at.shape[3] + a_slot[..., 1]  # (M, K): A[i, k]'s slot, lane * values + value
        b_lin = b_slot[..., 0] * bt.shape[3] + b_slot[..., 1]  # (K, N)
        at_s, bt_s = at.reshape(self.B, W, -1, LMAX), bt.reshape(self.B, W, -1, LMAX)
        aa_s, ba_s = aa.reshape(self.B, W, -1), ba.reshape(self.B, W, -1)
        a_ar, b_ar = aa_s[:, :, a_lin], ba_s[:, :, b_lin]  # (B,W,M,K), (B,W,K,N)
        ka = _component(at_s, np.clip(aa_s - 1, 0, LMAX - 1))[:, :, a_lin]
        kb = _component(bt_s, np.clip(np.where(ba_s >= 2, ba_s - 2, 0), 0, LMAX - 1))[:, :, b_lin]
        # a product with a known-zero operand adds nothing: nothing to pair (docs/language.md, Zero tags)
        a_zero = is_zero(at_s, aa_s)[:, :, a_lin]  # (B,W,M,K)
        b_zero = is_zero(bt_s, ba_s)[:, :, b_lin]  # (B,W,K,N)
        wave_active = np.asarray(self.active).reshape(self.B, W, g).all(-1)
        key = ("ave/mma-k-pairing", s.span.line)
        f = self.failures.setdefault(key, Failure("ave/mma-k-pairing", s.span.line, 0, 0, {}))
        f.checked += int(wave_active.sum()) * instr.m * instr.k * instr.n
        if _pairs_everywhere(ka, kb, a_ar, b_ar):  # the usual case, decided without the (M, K, N) cube
            n = 0
        else:
            ok = (ka[:, :, :, :, None] == kb[:, :, None, :, :]) & (a_ar > 0)[..., None] & (b_ar > 0)[:, :, None]
            ok = ok | a_zero[..., None] | b_zero[:, :, None]
            bad = np.asarray(~ok) & wave_active[:, :, None, None, None]
            n = int(bad.sum())
        if n:
            where = np.argwhere(bad)  # (b, w, i, k, j)
            i_, k_, j_ = where[:, 2], where[:, 3], where[:, 4]
            merge_classes(f.classes, {"lanes_a": a_slot[i_, k_, 0], "values_a": a_slot[i_, k_, 1],
                                       "lanes_b": b_slot[k_, j_, 0], "values_b": b_slot[k_, j_, 1], "k": k_})
        if n and not f.failed:
            bb, w, i, k, j = (int(x) for x in np.argwhere(bad)[0])
            la, va = (int(x) for x in a_slot[i, k])
            lb, vb = (int(x) for x in b_slot[k, j])
            f.first = {"block": list(self.block_ids[bb]), "group": w, "iterations": dict(self.loop_vars),
                       "k": k, "row": i, "col": j, "lane_a": la, "value_a": va, "lane_b": lb, "value_b": vb,
                       "a_tag": tag_list(at[bb, w, la, va], aa[bb, w, la, va]),
                       "b_tag": tag_list(bt[bb, w, lb, vb], ba[bb, w, lb, vb])}
        f.failed += n
        self._probe(s, {"a": (a.tag, a.arity), "b": (b.tag, b.arity)})
        # result tags: row components from A, column component from B, both at the first k whose
        # product has no zero operand; where every product has one, the result is a known zero
        cells = (cr * instr.n + cc).reshape(-1)  # per result slot (lane, value) of every wave: row i * n + col j
        wave = (np.arange(self.B)[:, None] * W + np.arange(W)[None, :])[..., None]  # (B, W, 1)
        if a_zero.any() or b_zero.any():
            live = ~(a_zero[..., None] | b_zero[:, :, None])  # (B, W, M, K, N)
            first = np.argmax(live, axis=3)  # (B, W, M, N)
            first_k = first.reshape(self.B, W, -1)[:, :, cells]  # (B, W, S): each slot's first live k
            zero = ~np.any(live, axis=3).reshape(self.B, W, -1)[:, :, cells]
            a_src = wave * at_s.shape[2] + a_lin[cells // instr.n, first_k]  # A[i, first k]'s slot row in at_s
            b_src = wave * bt_s.shape[2] + b_lin[first_k, cells % instr.n]  # B[first k, j]'s in bt_s
        else:  # no zero operand anywhere: every product is live, the first at k = 0 (the same every call)
            zero = None
            key = (instr.name, W, at_s.shape[2], bt_s.shape[2])
            sources = self.__dict__.setdefault("_mma_sources", {})  # per simulation: B and W are its own
            cached = sources.get(key)
            if cached is None:
                cached = sources[key] = (wave * at_s.shape[2] + a_lin[cells // instr.n, 0],
                                                  wave * bt_s.shape[2] + b_lin[0, cells % instr.n])
            a_src, b_src = cached
        rows = np.take(at_s.reshape(-1, LMAX), a_src, axis=0)  # (B, W, S, LMAX)
        arow, bcol = np.take(aa_s, a_src), np.take(ba_s, b_src)
        bval = np.take(bt_s.reshape(-1), b_src * LMAX + np.clip(bcol - 1, 0, LMAX - 1))  # B's last component
        res_ar = np.where((arow > 0) & (bcol > 0), arow, 0)
        r = int(res_ar.flat[0]) if res_ar.size else 0
        if r > 0 and bool(np.all(res_ar == r)):  # one arity everywhere (the usual case): slices, no index arrays
            ct = rows  # a fresh array (np.take)
            ct[..., r:] = 0
            ct[..., r - 1] = bval
        else:
            lmax_idx = np.arange(LMAX)
            ct = rows * (lmax_idx < res_ar[..., None])  # A's row components, up to the result's arity
            np.put_along_axis(ct, np.maximum(res_ar - 1, 0)[..., None], np.where(res_ar > 0, bval, 0)[..., None],
                              -1)
        if zero is not None:
            ct[..., 0] = np.where(zero, ZERO_MARK, ct[..., 0])
        slot_tag = ct.reshape(self.B, self.T, -1, LMAX)
        slot_ar = res_ar.reshape(self.B, self.T, -1)
        # no product contributes (a K tail): the sum is the accumulator's, and keeps its tag
        keeps_acc = None if zero is None else \
            zero.reshape(self.B, self.T, -1) & (c.arity != 0)  # type: ignore[operator]
        if keeps_acc is not None and keeps_acc.any():
            slot_tag = np.where(keeps_acc[..., None], c.tag, slot_tag)  # type: ignore[arg-type]
            slot_ar = np.where(keeps_acc, c.arity, slot_ar)  # type: ignore[arg-type]
        everywhere = keep.all()
        out.tag = slot_tag if everywhere else np.where(keep[..., None], slot_tag, out.tag)  # type: ignore[arg-type]
        out.arity = slot_ar if everywhere else np.where(keep, slot_ar, out.arity)  # type: ignore[arg-type]


def _component(tags: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """tags[..., pos] per element (tags (..., LMAX), pos (...)): one slice when pos is the same
    everywhere (every operand of one arity), else a gather."""
    p = int(pos.flat[0]) if pos.size else 0
    if bool(np.all(pos == p)):
        return tags[..., p]
    return np.take_along_axis(tags, pos[..., None], -1)[..., 0]


def _pairs_everywhere(ka: np.ndarray, kb: np.ndarray, a_ar: np.ndarray, b_ar: np.ndarray) -> bool:
    """Whether every product A[i, k] * B[k, j] of every wave pairs (tagged operands, A's K
    component equal to B's): it does when all operands are tagged, A's K component at each k is
    the same in every row i, B's in every column j, and the two agree. That takes O(MK + KN) per
    wave instead of the O(MKN) cube, which only a kernel that may fail the check needs."""
    if not (bool(np.all(a_ar > 0)) and bool(np.all(b_ar > 0))):
        return False
    ka0, kb0 = ka[:, :, :1, :], kb[:, :, :, :1]  # (B, W, 1, K), (B, W, K, 1)
    return bool(np.all(ka == ka0)) and bool(np.all(kb == kb0)) and bool(np.all(ka0[:, :, 0, :] == kb0[..., 0]))
