"""Indexed read-only view of one kernel's facts (and derived relations) for the Z3 stages."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..lang.source import Span
from .kernel_facts import KernelFacts


@dataclass(frozen=True)
class LoopInfo:
    header: int
    latch: int
    var: str
    lo: int
    hi: int
    step: int


@dataclass(frozen=True)
class AccessInfo:
    aid: int
    stmt: int
    buffer: str
    kind: str
    addr: int
    coords: tuple[int, ...]


@dataclass
class KernelView:
    kf: KernelFacts
    stmts: dict[int, tuple[str, Span]] = field(default_factory=dict)
    loops: dict[int, LoopInfo] = field(default_factory=dict)
    parent: dict[int, int] = field(default_factory=dict)
    guards: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    buffers: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (space, size expr)
    dtypes: dict[str, str] = field(default_factory=dict)  # id -> element type
    dims: dict[str, list[int]] = field(default_factory=dict)  # id -> extent expr per dimension
    bijective: set[str] = field(default_factory=set)  # buffers whose layout is a bijection
    accesses: dict[int, AccessInfo] = field(default_factory=dict)
    values: dict[int, tuple[str, int]] = field(default_factory=dict)  # vid -> (kind, stmt)
    value_args: dict[int, list[int]] = field(default_factory=dict)
    value_load: dict[int, int] = field(default_factory=dict)
    store_value: dict[int, int] = field(default_factory=dict)
    tags: dict[str, tuple[str, list[int]]] = field(default_factory=dict)  # buffer -> (name, comps)
    launch: list[tuple[int, int]] = field(default_factory=list)  # per dim (grid, block)
    group_kind: str = "wave"
    group_size: int = 64
    assumptions: list[int] = field(default_factory=list)
    mma: dict[int, tuple[str, int, int, int, int]] = field(default_factory=dict)
    assert_rel: dict[int, int] = field(default_factory=dict)
    assert_mask: dict[int, int] = field(default_factory=dict)  # site -> predicate over lhs:i
    index_values: dict[str, tuple[int, int, bool]] = field(default_factory=dict)  # index tensor -> (lo, hi, inj)
    slot_range: dict[int, int] = field(default_factory=dict)  # stmt -> n: its accesses read per slot in [0, n)
    vector_lanes: dict[int, int] = field(default_factory=dict)  # access -> n: one of n elements of a vector access
    branch_cond: dict[int, int] = field(default_factory=dict)  # `if` stmt -> its condition (-1: on data)
    in_branch: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # stmt -> enclosing (if, arm)
    barriers: list[int] = field(default_factory=list)
    aliases: dict[str, tuple[str, int]] = field(default_factory=dict)  # subview -> (storage, base)

    @staticmethod
    def of(kf: KernelFacts) -> "KernelView":
        v = KernelView(kf)
        path = kf.source.path
        for _, s, kind, line, col, el, ec in kf.relation("stmt"):
            v.stmts[s] = (kind, Span(path, line, col, el, ec, kf.call_sites.get(s, ())))
        for _, h, latch, var, lo, hi, step in kf.relation("loop"):
            v.loops[h] = LoopInfo(h, latch, var, lo, hi, step)
        for _, s, h in kf.relation("parent_loop"):
            v.parent[s] = h
        for _, s, c, p in kf.relation("guard"):
            v.guards.setdefault(s, []).append((c, p))
        for _, b, space, size in kf.relation("buffer"):
            v.buffers[b] = (space, size)
        v.dtypes = {b: t for _, b, t in kf.relation("buffer_type")}
        v.bijective = {b for _, b in kf.relation("layout_bijective")}
        for _, b, d, e in sorted(kf.relation("buffer_dim"), key=lambda r: (r[1], r[2])):
            v.dims.setdefault(b, []).append(e)
        coords: dict[int, dict[int, int]] = {}
        for _, a, d, e in kf.relation("access_coord"):
            coords.setdefault(a, {})[d] = e
        addrs = {a: e for _, a, e in kf.relation("access_addr")}
        for _, a, s, b, kind in kf.relation("access"):
            cs = coords.get(a, {})
            v.accesses[a] = AccessInfo(a, s, b, kind, addrs[a], tuple(cs[i] for i in sorted(cs)))
        for _, vid, kind, s in kf.relation("value"):
            v.values[vid] = (kind, s)
        for _, vid, pos, arg in sorted(kf.relation("value_arg"), key=lambda r: (r[1], r[2])):
            v.value_args.setdefault(vid, []).append(arg)
        v.value_load = {vid: a for _, vid, a in kf.relation("value_load")}
        v.store_value = {a: vid for _, a, vid in kf.relation("store_value")}
        comps: dict[str, dict[int, int]] = {}
        for _, b, i, e in kf.relation("tag_comp"):
            comps.setdefault(b, {})[i] = e
        for _, b, name, arity, _s in kf.relation("tag_bind"):
            v.tags[b] = (name, [comps[b][i] for i in range(arity)])
        for _, d, g, blk in sorted(kf.relation("launch"), key=lambda r: r[1]):
            v.launch.append((g, blk))
        for _, kind, size in kf.relation("group_size"):
            v.group_kind, v.group_size = kind, size
        v.assumptions = [e for _, e in kf.relation("assumption")]
        for _, s, instr, va, vb, vc, d in kf.relation("mma"):
            v.mma[s] = (instr, va, vb, vc, d)
        for _, s, _l, _r, rel in kf.relation("assert_rel"):
            v.assert_rel[s] = rel
        for _, s, _v, rel in kf.relation("assert_mask"):
            v.assert_mask[s] = rel
        v.slot_range = {s: n for _, s, n in kf.relation("slot_range")}
        v.vector_lanes = {a: n for _, a, n in kf.relation("access_vector")}
        v.branch_cond = {s: c for _, s, c in kf.relation("branch")}
        for _, s, b, pol in kf.relation("in_branch"):
            v.in_branch.setdefault(s, []).append((b, pol))
        v.barriers = [s for _, s in kf.relation("barrier")]
        v.aliases = {b: (s, base) for _, b, s, base in kf.relation("alias")}
        for _, b, lo, hi, inj in kf.relation("index_values"):
            v.index_values[b] = (lo, hi, bool(inj))
        return v

    def enclosing_loops(self, stmt: int) -> list[int]:
        """Loop headers around a statement, outermost first."""
        out = []
        s = self.parent.get(stmt)
        while s is not None:
            out.append(s)
            s = self.parent.get(s)
        return list(reversed(out))

    def all_guards(self, stmt: int) -> list[tuple[int, int]]:
        return self.guards.get(stmt, [])

    def span(self, stmt: int) -> Span:
        return self.stmts[stmt][1]
