"""Provenance chains: the derived relations, instantiated as Z3 terms.

Given a value at a dynamic instance, `Expander.value` returns every alternative way its tag
can arise: one alternative per path through `reaching_store` (store -> load hops), each with
the tag tuple as Z3 terms, the constraints that make that path real (the writer's thread and
iteration, address equality), and the program points passed, for the report.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

import z3

from ..facts.view import KernelView
from ..hw.instructions import INSTRUCTIONS, Instruction
from ..lang import ast as A
from ..lang.parser import parse_expression
from .cross_arm import CrossArm, Plan
from .deferred import Deferred
from .raw_terms import compare, conjunction, int_binary, negation, numeral
from .slice_cover import Cover, SliceCovers
from .smt import Encoder, Instance, as_int
from .unwritten import Unwritten

MAX_DEPTH = 24
KILL_DEPTH = 3  # later iterations instantiated per overwriting store, at least (see kill_depth)
MAX_STAGES = 8  # a leading extent above this is a data dimension, not pipeline stages


def kill_depths(view: KernelView) -> dict[str, int]:
    """Iterations of kill instantiation per buffer: a buffer of S stages (stage = iteration mod S,
    the leading extent of a shared buffer of rank >= 3) is refilled every S iterations, so the
    overwrite that makes an older writer stale is at most S iterations later; S + 1 also covers a
    reader one iteration off. KILL_DEPTH for every other buffer. Each instantiation is a necessary
    condition, so any depth keeps the alternatives sound; too small a depth only costs precision.
    (One depth for the whole kernel made a P buffer with a region per wave, (8, 32, 32), give every
    register array 9 instantiations: 500 constraints per query in the production attention.)"""
    out = {}
    for b, dims in view.dims.items():
        stages = view.kf.table.nodes[dims[0]] if dims else None
        staged = (view.buffers[b][0] == "shared" and len(dims) >= 3 and stages.op == "const"
                  and stages.value <= MAX_STAGES)
        out[b] = max(KILL_DEPTH, stages.value + 1) if staged else KILL_DEPTH
    return out


@dataclass
class Step:
    """One program point of a chain, with the instance that executed it."""

    role: str  # source | load | store | mma-operand
    access: int
    stmt: int
    buffer: str
    inst: Instance
    note: str = ""


@dataclass
class Alt:
    tag: list[z3.ArithRef] | None  # None: Top (no tagged source on this path)
    tag_name: str
    coords: list[z3.ArithRef]
    constraints: list[z3.BoolRef]
    chain: list[Step]
    unknown: str = ""  # non-empty: this path could not be followed (reason)
    stat: bool = False  # the tag is a row statistic (a reduction dropped one component: `dropped`)
    zero: bool = False  # the value is a known zero on this path (padding; docs/language.md, Zero tags)
    # conditions under which the tagged source passed the tagged branch of each select on the
    # path (recorded, not assumed: the tag is the same either way; ave/masked-flow assumes them)
    flow: list[z3.BoolRef] = field(default_factory=list)
    flow_sites: list[int] = field(default_factory=list)  # the statements of those selects
    dropped: int = -1  # a statistic: the position in the reduced values' tag of the component it dropped


def product_operands(chain: list[Step]) -> tuple[list[Step], list[Step], list[Step]] | None:
    """The outermost matrix product of a chain: (the steps outside it, those of its A operand,
    those of its B operand), or None without one. `mma_result` lays a product out as its A
    marker, the A operand's chain, its B marker, the B operand's chain (each operand's chain may
    hold products of its own, laid out alike), and the steps that reach the product (loads and
    stores of its result) come before it: the B marker of the first A marker is the one that
    closes it, counting markers as brackets."""
    start = next((i for i, step in enumerate(chain) if step.role == "mma-operand"), None)
    if start is None or chain[start].buffer != "A":
        return None
    depth = 0
    for i in range(start, len(chain)):
        step = chain[i]
        if step.role != "mma-operand":
            continue
        depth += 1 if step.buffer == "A" else -1
        if depth == 0:
            return chain[:start], chain[start:i], chain[i:]
    return None


def product_components(a: Alt) -> tuple[list[z3.ArithRef], list[z3.ArithRef]]:
    """The components of `a`'s tag that came from its outermost product's A operand and from its
    B operand (`mma_result`: all of A's but its last, then B's last), where a reduction after
    the product dropped one (`dropped`, a position in the product's tag) minus that one."""
    tag = list(a.tag or ())
    if a.stat and a.dropped >= 0:  # the product's tag had the dropped component at `dropped`
        width = len(tag) + 1
        positions = [p for p in range(width) if p != a.dropped]
    else:
        width, positions = len(tag), list(range(len(tag)))
    from_a = [t for t, p in zip(tag, positions) if p < width - 1]
    from_b = [t for t, p in zip(tag, positions) if p == width - 1]
    return from_a, from_b


def row_of(a: Alt, drops: int) -> Alt:
    """The statistic a reduction makes of `a`: its tag without component `drops` (negative: from
    the end). A statistic stays itself (the reduction combined one row's statistics;
    ave/row-statistics checks they are of one row). A tag without that component: UNKNOWN."""
    if a.stat or not a.tag:
        return replace(a, stat=True)
    pos = drops if drops >= 0 else len(a.tag) + drops
    if not 0 <= pos < len(a.tag):
        return replace(a, tag=None, stat=True, unknown=f"a reduction drops tag component {drops}, but its operand is "
                                                          f"tagged {a.tag_name} with {len(a.tag)} components")
    return replace(a, tag=a.tag[:pos] + a.tag[pos + 1:], tag_name=f"{a.tag_name}.row", stat=True, dropped=pos)


@lru_cache(maxsize=None)
def _map_ast(text: str) -> A.Expr:
    return parse_expression(text)


_MAP_OPS = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod"}


def eval_map(text: str, lane: z3.ArithRef, v: z3.ArithRef) -> z3.ArithRef:
    """Evaluate an instruction operand map (an `.ave` expression over lane and v) in Z3: the
    terms z3py's operators make, through the C API (raw_terms)."""

    def go(e: A.Expr) -> z3.ArithRef:
        if isinstance(e, A.Int):
            return numeral(e.value, lane.ctx)
        if isinstance(e, A.Name):
            return {"lane": lane, "v": v}[e.id]
        if isinstance(e, A.BinOp) and e.op in _MAP_OPS:
            return int_binary(_MAP_OPS[e.op], go(e.left), go(e.right))
        raise ValueError(f"unsupported operand-map expression {e}")

    try:
        return go(_map_ast(text))
    finally:
        del go  # empties the closure's cell: no function <-> cell cycle left for the collector


class Expander:
    def __init__(self, view: KernelView, enc: Encoder, derived: dict[str, list[tuple]]):
        self.view = view
        self.enc = enc
        self.reaching: dict[int, list[tuple[int, int, int, int]]] = {}
        for _k, la, sa, carrier, barrier, dist1 in derived.get("reaching_store", []):
            self.reaching.setdefault(la, []).append((sa, carrier, barrier, dist1))
        self.has_root = {v for _k, v in derived.get("value_has_root", [])}
        self.roots = {a for _k, a in derived.get("root", [])}  # rules/provenance.dl decides what a root is
        self.cross_arm = {a for _k, a in derived.get("uncertain_load", [])}
        # statements under a condition on data: no guard says when they run, so they kill nothing
        self.data_guarded = {s for _k, s in view.kf.relation("data_guard")}
        self.full = {v for _k, v in derived.get("full_flow", [])}
        self.lane_reduce = {v: w for _k, v, _op, w in view.kf.relation("lane_reduce")}
        self.lane_source = {v: e for _k, v, e in view.kf.relation("lane_source")}
        self.slot_reduce = {v: n for _k, v, _op, n in view.kf.relation("slot_reduce")}
        self.drops = {v: d for _k, v, d in view.kf.relation("reduce_drops")}
        self.slot_axis = {v: (inner, outs) for _k, v, inner, outs in view.kf.relation("slot_reduce_axis")}
        self.butterfly = {v: (own, partner) for _k, v, own, partner in view.kf.relation("butterfly")}
        self.zero = {v for _k, v in view.kf.relation("value_zero")}
        self.selects = {v for _k, v, op in view.kf.relation("value_op") if op == "select"}
        self.index_expr = {v: e for _k, v, e in view.kf.relation("value_expr")}
        self._memo: dict[tuple, tuple[Instance, list[Alt]]] = {}
        # kills by what they are built from (`not_overwritten`): key -> (kills, names taken, the
        # key's terms, kept alive so that Z3 cannot give their ids to other terms)
        self._kills_memo: dict[tuple, tuple[list[z3.BoolRef], int, tuple]] = {}
        self.covers = SliceCovers(view, enc, self.data_guarded)
        self.kill_depths = kill_depths(view)
        self.unwritten = Unwritten(view, enc, self.data_guarded, self.kill_depths)
        steps = {(la, sa) for _k, la, sa, _n in derived.get("chain_step", [])}
        self.arms = CrossArm(view, enc, self.data_guarded, steps)
        self._loops: dict[int, tuple[list[int], frozenset[int]]] = {}
        self._stores: dict[str, list] = {}
        self._names: dict[int, dict[str, int]] = {}

    def loops_of(self, stmt: int) -> tuple[list[int], frozenset[int]]:
        """The loops around a statement, outermost first, and as a set: asked per kill
        instantiation, for the same few statements (the view walks the parent chain each time)."""
        hit = self._loops.get(stmt)
        if hit is None:
            loops = self.view.enclosing_loops(stmt)
            hit = self._loops[stmt] = (loops, frozenset(loops))
        return hit

    def stores_into(self, buffer: str) -> list:
        """The stores and whole-array writes into a buffer, in the order `view.accesses` lists them."""
        hit = self._stores.get(buffer)
        if hit is None:
            hit = self._stores[buffer] = [a for a in self.view.accesses.values()
                                          if a.buffer == buffer and a.kind in ("store", "write_all")]
        return hit

    # ------------------------------------------------------------ values
    def value(self, vid: int, inst: Instance, seen: tuple[int, ...] = ()) -> list[Alt]:
        """Memoised per (value, instance, path): an online softmax reuses each statistic in several
        operations of one statement, and re-expanding it (with its kill instantiations) dominated."""
        key = (vid, id(inst), seen)
        hit = self._memo.get(key)
        if hit is None or hit[0] is not inst:
            hit = (inst, self._value(vid, inst, seen))
            self._memo[key] = hit
        return hit[1]

    def _value(self, vid: int, inst: Instance, seen: tuple[int, ...] = ()) -> list[Alt]:
        kind, stmt = self.view.values[vid]
        if len(seen) > MAX_DEPTH:
            return [self._unknown(inst, "provenance chain too long")]
        if vid in self.zero:
            return [Alt(None, "zero", [], [], [], zero=True)]
        if kind == "load":
            return self.load(self.view.value_load[vid], inst, seen)
        if kind == "elementwise":
            return self.elementwise(vid, inst, seen)
        if kind == "reduce":
            (arg,) = self.view.value_args[vid]
            at, extra = inst, []
            if vid in self.slot_reduce:  # any one slot: ave/row-statistics proves they share the row
                at, extra = self.reduced_slot(inst, vid)
            drops = self.drops.get(vid, -1)
            return [replace(row_of(a, drops), constraints=extra + a.constraints) for a in self.value(arg, at, seen)]
        if kind == "mma":
            return self.mma_result(vid, stmt, inst, seen)
        if kind == "shuffle":  # the operand as the source lane computed it
            (arg,) = self.view.value_args[vid]
            return self.value(arg, self.other_thread(inst, self.lane_source[vid]), seen)
        return [Alt(None, "", [], [], [])]

    def other_slot(self, inst: Instance, slots: int) -> tuple[Instance, list[z3.BoolRef]]:
        """`inst` with a fresh register slot in [0, slots) (same thread and iterations)."""
        other = inst.copy(f"{inst.label}~")
        slot = self.enc.ranged_var(f"{self.enc.fresh(inst.label)}.slot", 0, slots - 1)
        other.env["slot"] = slot
        return other, [slot >= 0, slot < slots]

    def reduced_slot(self, inst: Instance, vid: int) -> tuple[Instance, list[z3.BoolRef]]:
        """`inst` at a fresh one of the slots the slot reduction `vid` combines; along an axis
        (`slot_reduce_axis`), one of those of the output slot `inst` writes."""
        slots = self.slot_reduce[vid]
        other, cons = self.other_slot(inst, slots)
        if vid in self.slot_axis:
            inner, _outs = self.slot_axis[vid]
            o, j = inst.env["slot"], other.env["slot"]
            other.env["slot"] = (o / inner) * (slots * inner) + j * inner + o % inner
        return other, cons

    def other_thread(self, inst: Instance, linear_eid: int) -> Instance:
        """`inst` at another thread of its block (same iterations): the one whose linear id is the
        expression `linear_eid` evaluated at `inst`."""
        other = inst.copy(f"{inst.label}'")
        self.enc.set_linear_thread(other, self.enc.int_term(linear_eid, inst.env))
        return other

    def elementwise(self, vid: int, inst: Instance, seen: tuple[int, ...]) -> list[Alt]:
        """The tag of the one full operand; without one, the first tagged statistic on this path
        (ave/row-statistics checks that the others agree with it); two full operands: Top."""
        if vid in self.butterfly and self.butterfly[vid][0] in self.full:  # a row statistic of `own`
            return [row_of(a, self.drops.get(vid, -1)) for a in self.value(self.butterfly[vid][0], inst, seen)]
        rooted = [a for a in self.view.value_args.get(vid, []) if a in self.has_root]
        full = [a for a in rooted if a in self.full]
        if len(full) > 1 or not rooted:
            return [Alt(None, "", [], [], [])]
        if full or len(rooted) == 1:
            arg = (full or rooted)[0]
            if vid in self.selects:
                return self._select(vid, arg, inst, seen)
            return self.value(arg, inst, seen)
        # statistics only: the first operand that carries a tag on this path gives it (as in the
        # simulator). Its tagged alternatives, then the next operand's under each path on which
        # the first is untagged (an initial -inf, 0): linear in the alternatives, not a product.
        return self._first_tagged(rooted, inst, seen)

    def _select(self, vid: int, arg: int, inst: Instance, seen: tuple[int, ...]) -> list[Alt]:
        """`select(c, x, y)` with one tagged branch: its alternatives, recording the condition under
        which that branch is taken (c for x, not c for y) at this instance. A data-dependent c
        records nothing (the element may always pass)."""
        cond_v, then_v, _else_v = self.view.value_args[vid][:3]
        alts = self.value(arg, inst, seen)
        if cond_v not in self.index_expr:
            return alts
        c = self.enc.bool_term(self.index_expr[cond_v], inst.env)
        taken = c if arg == then_v else z3.Not(c)
        stmt = self.view.values[vid][1]
        return [replace(a, flow=a.flow + [taken], flow_sites=a.flow_sites + [stmt]) for a in alts]

    def _first_tagged(self, args: list[int], inst: Instance, seen: tuple[int, ...]) -> list[Alt]:
        alts = self.value(args[0], inst, seen)
        if any(a.tag is not None for a in alts):
            # a loop-carried cycle back into this statistic is the statistic itself, not an untagged
            # start value: it must not hand the tag to the next operand
            alts = [a for a in alts if not a.unknown]
        if len(args) == 1:
            return alts
        out = [a for a in alts if a.tag is not None or a.unknown]
        for top in (a for a in alts if a.tag is None and not a.unknown):
            for rest in self._first_tagged(args[1:], inst, seen):
                out.append(Alt(rest.tag, rest.tag_name, rest.coords, top.constraints + rest.constraints, rest.chain,
                               rest.unknown, rest.stat, dropped=rest.dropped))
        return out

    def _unknown(self, inst: Instance, why: str) -> Alt:
        return Alt(None, "", [], [], [], unknown=why)

    def load(self, aid: int, inst: Instance, seen: tuple[int, ...]) -> list[Alt]:
        acc = self.view.accesses[aid]
        if aid in self.roots:
            name, comps = self.view.tags[acc.buffer]
            coords = [self.enc.int_term(c, inst.env) for c in acc.coords]
            env = dict(inst.env)
            env.update({f"arg:{i}": c for i, c in enumerate(coords)})
            values = [self.enc.int_term(c, env) for c in comps]
            # elements outside the tensor are reported by the bounds invariants, not followed here
            extents = [self.enc.int_term(e, inst.env) for e in self.view.dims.get(acc.buffer, [])]
            ctx = self.enc.ctx
            inside = [conjunction([int_binary("ge", c, numeral(0, ctx)), compare("lt", c, e)], ctx)
                      for c, e in zip(coords, extents)] if len(extents) == len(coords) else []
            return [Alt(values, name, coords, inside, [Step("source", aid, acc.stmt, acc.buffer, inst)])]
        if aid in self.cross_arm:
            return self.cross_arm_load(aid, inst, seen)
        if aid in seen:
            return [self._unknown(inst, "loop-carried provenance cycle")]
        out: list[Alt] = []
        for sa, carrier, _barrier, dist1 in self.reaching.get(aid, []):
            writer, cons = self.writer(inst, acc.stmt, sa, carrier, dist1)
            store = self.view.accesses[sa]
            size = self.enc.nodes[self.view.buffers[store.buffer][1]]
            cons += self.same_element(store, writer, acc, inst)
            # built only for the queries that need them (solver/deferred.py)
            cons.append(Deferred(self.not_overwritten, sa, writer, carrier, acc, inst))
            if store.kind == "write_all" and size.op == "const":
                cons += [writer.env["slot"] >= 0, writer.env["slot"] < size.value]
            hop = [Step("load", aid, acc.stmt, acc.buffer, inst), Step("store", sa, store.stmt, store.buffer, writer)]
            for sub in self.value(self.view.store_value[sa], writer, seen + (aid,)):
                out.append(Alt(sub.tag, sub.tag_name, sub.coords, cons + sub.constraints, hop + sub.chain,
                               sub.unknown, sub.stat, sub.zero, sub.flow, sub.flow_sites, sub.dropped))
        if not out:
            return [Alt(None, "", [], [], [Step("load", aid, acc.stmt, acc.buffer, inst)])]
        unwritten = self.unwritten.constraints(acc, inst)
        if unwritten is not None:  # no store wrote the element yet: it holds no tagged value
            out.append(Alt(None, "", [], unwritten, [Step("load", aid, acc.stmt, acc.buffer, inst,
                                                          "no store wrote this element before the read")]))
        return out

    def cross_arm_load(self, aid: int, inst: Instance, seen: tuple[int, ...]) -> list[Alt]:
        """A load of an untagged shared buffer that the other arm of a wave-specialized `if` stores
        into: one alternative per store of that arm (any of its threads and iterations, in an
        earlier barrier interval, not overwritten in between) and one for "not written yet"
        (cross_arm.py); UNKNOWN where the kernel is outside what that module states."""
        plan = self.arms.plan(aid, bool(self.reaching.get(aid)))
        if not isinstance(plan, Plan):
            return [self._unknown(inst, "the loaded value may come from a store in the other arm of a wave-specialized "
                                        f"`if`, a flow that is not followed here: {plan}")]
        if aid in seen:
            return [self._unknown(inst, "loop-carried provenance cycle")]
        acc = self.view.accesses[aid]
        out: list[Alt] = []
        for sa in plan.stores:
            store = self.view.accesses[sa]
            writer, cons = self.arms.writer(plan, sa, acc, inst)
            cons += self.same_element(store, writer, acc, inst)
            cons.append(Deferred(self.arms.not_overwritten, plan, sa, writer, acc, inst))
            hop = [Step("load", aid, acc.stmt, acc.buffer, inst),
                   Step("store", sa, store.stmt, store.buffer, writer, "in the other arm, an earlier barrier interval")]
            for sub in self.value(self.view.store_value[sa], writer, seen + (aid,)):
                out.append(Alt(sub.tag, sub.tag_name, sub.coords, cons + sub.constraints, hop + sub.chain,
                               sub.unknown, sub.stat, sub.zero, sub.flow, sub.flow_sites, sub.dropped))
        out.append(Alt(None, "", [], self.arms.unwritten(plan, acc, inst), [Step(
            "load", aid, acc.stmt, acc.buffer, inst, "no store of the other arm wrote this element in an earlier "
                                                     "barrier interval")]))
        return out

    def same_element(self, store, writer: Instance, load, reader: Instance) -> list[z3.BoolRef]:
        """The store and the load touch the same element. Through a bijective layout that is
        equality of coordinates (cheap for Z3 even when the address is swizzled); accesses out of
        bounds are reported by ave/buffer-bounds, not followed here. Otherwise: equal addresses."""
        if (store.buffer == load.buffer and store.buffer in self.view.bijective and store.coords
                and len(store.coords) == len(load.coords)):
            extents = [self.enc.int_term(e, reader.env) for e in self.view.dims[store.buffer]]
            out = []
            for cs, cl, ext in zip(store.coords, load.coords, extents):  # a == b, b >= 0, b < ext
                a, b = self.enc.int_term(cs, writer.env), self.enc.int_term(cl, reader.env)
                out += [compare("eq", a, b), int_binary("ge", b, numeral(0, b.ctx)), compare("lt", b, ext)]
            return out
        return [compare("eq", self.enc.int_term(store.addr, writer.env), self.enc.int_term(load.addr, reader.env))]

    def not_overwritten(self, sa: int, writer: Instance, carrier: int, load, reader: Instance) -> list[z3.BoolRef]:
        """`_not_overwritten`, built once per kernel for the same store, load, writer's and reader's
        terms and first fresh name (names restart per obligation: Encoder.restart_names). Why:
        unrolled accumulators share their operands, and a family (solver/families.py) builds each
        member's kills; speed/gemm_mma_pipelined's 16 products over four A and four B operands
        built 96 of their 192 kill lists a second time (~0.16 s of 0.8 s). The build is a function
        of the key: it reads the instances' terms and the kernel's static facts, takes fresh names
        from the counter (taken again on a hit, so later names do not move) and makes the same
        hash-consed terms; a build that asked for a bit decomposition is not kept (those are per
        obligation: Encoder.restore_side)."""
        enc = self.enc
        start, asked = enc.names_used(), enc.bit_decompositions_asked
        key = (sa, carrier, id(load), writer.stmt, reader.stmt, _env_key(writer), _env_key(reader), start)
        hit = self._kills_memo.get(key)
        if hit is not None:
            enc.resume_names(start + hit[1])
            return list(hit[0])
        kills = self._not_overwritten(sa, writer, carrier, load, reader)
        if enc.bit_decompositions_asked == asked:
            alive = (tuple(writer.env.values()), tuple(reader.env.values()))
            self._kills_memo[key] = (list(kills), enc.names_used() - start, alive)
        return kills

    def _not_overwritten(self, sa: int, writer: Instance, carrier: int, load, reader: Instance
                         ) -> list[z3.BoolRef]:
        """Per-address kill by instantiation: a later execution of a store into the same buffer by
        the writer's own thread (same inner-loop values, an iteration of an enclosing loop of the
        reader between the writer's and the reader's) that definitely writes the element read
        overwrote the writer's value. Each instantiation of "no store in between wrote it" is a
        necessary condition, so adding it keeps the alternatives an over-approximation; it is what
        lets multi-stage buffers (stage = iteration mod S) and unrolled register writes verify."""
        store = self.view.accesses[sa]
        if self.view.buffers[store.buffer][0] == "global":
            return []
        reader_set = self.loops_of(load.stmt)[1]
        writer_set = self.loops_of(store.stmt)[1]
        # loops in which the writer runs in the reader's own iteration (see `writer`)
        common = writer_set & reader_set
        same_iteration = common if carrier == 0 else self.loops_of(carrier)[1] & common
        either = reader_set | writer_set
        ctx = self.enc.ctx
        out: list[z3.BoolRef] = []
        for other in self.stores_into(store.buffer):
            other_loops, other_set = self.loops_of(other.stmt)
            if (not other_loops and store.stmt < other.stmt < load.stmt
                    and other.stmt not in self.data_guarded):
                # straight-line code: `other` runs once, after the writer and before the reader (a
                # guarded store there, such as a masked load's, overwrote the value where its guard holds)
                inst = self.enc.new_instance(other.stmt, "k", share_block=reader, share_thread=writer)
                cond = [*inst.constraints, *self.same_element(other, inst, load, reader)]
                out.append(negation(conjunction(cond, ctx)))
                continue
            if (other_loops and not other_set & either
                    and store.stmt < other.stmt < load.stmt and other.stmt not in self.data_guarded):
                # loops of their own between the writer's and the reader's (no loop holds two of
                # the three: statement ids are in program order), so all of them run in between
                out.append(negation(self._first_iteration_kill(other, writer, load, reader)))
                continue
            if other.stmt in self.data_guarded:  # whether it ran at all depends on data
                continue
            depth = self.kill_depths.get(store.buffer, KILL_DEPTH)
            for h in other_loops:
                group = self._slice_group(other, load, reader_set, h)
                members = group.members if group is not None else (other,)
                step = self.enc.nodes[self.view.loops[h].step].value
                writer_j = writer.env.get(f"loop:{h}") if h in writer_set else None
                same_iter_ok = all(m.stmt < load.stmt for m in members)  # program order in one iteration
                if group is not None:
                    if (h in reader_set and not same_iter_ok and other.stmt < load.stmt
                            and not (writer_j is not None and h in same_iteration)):
                        # in the reader's own iteration the group has not run whole (a member comes
                        # after the read): this member, before it, still kills there by itself
                        i = reader.env[f"loop:{h}"]
                        out.append(negation(self._kills(other, h, i, writer, writer_j, i, True, load, reader)))
                    if group.members[0] is not other:
                        continue  # the group's first store kills by the slice, for all of them
                if h in reader_set:
                    i = reader.env[f"loop:{h}"]
                    if writer_j is not None and h in same_iteration:
                        # writer and reader share this iteration: only a later statement of it can kill
                        later = all(m.stmt > store.stmt for m in members) and (
                            group is None or not group.inner & writer_set)
                        candidates = [i] if same_iter_ok and later else []
                    else:  # i - m * step
                        candidates = [int_binary("sub", i, numeral(m * step, ctx))
                                      for m in range(0 if same_iter_ok else 1, depth + 1)]
                elif writer_j is not None and self.loops_of(h)[1] <= writer_set:
                    # a loop the reader is outside of: its later iterations all run before the read
                    i, same_iter_ok, candidates = None, False, []
                else:
                    continue
                if writer_j is not None and h not in same_iteration:  # writer_j + m * step
                    candidates += [int_binary("add", writer_j, numeral(m * step, ctx)) for m in range(1, depth + 1)]
                for j2 in candidates:
                    kill = (self._slice_kill(other, group.compared, h, j2, writer, writer_j, i, same_iter_ok,
                                             load, reader) if group is not None else
                            self._kills(other, h, j2, writer, writer_j, i, same_iter_ok, load, reader))
                    out.append(negation(kill))
        return out

    def _first_iteration_kill(self, other, writer: Instance, load, reader: Instance) -> z3.BoolRef:
        """A store inside loops that lie between a writer and a reader (neither inside them): if the
        first iteration of each of its loops runs (and its guards hold: an arm of a wave-specialized
        `if`), it ran in between, so it overwrote the element if it wrote it there. One definite
        instance, never a free iteration (a free variable under the negation would say nothing);
        it ties a flow that only one arm lets through to a thread of that arm."""
        given: dict[int, z3.ExprRef] = {}
        env = dict(reader.env)
        for h in self.loops_of(other.stmt)[0]:  # outermost first: inner bounds may read outer variables
            given[h] = self.enc.int_term(self.view.loops[h].lo, env)
            env[f"loop:{h}"] = given[h]
        inst = self.enc.new_instance(other.stmt, "k", share_block=reader, share_thread=writer, loops=given)
        cond = list(inst.constraints) + self._overwrite_slot(other, inst, load, reader)
        for h, v in given.items():
            cond += self.enc.loop_range(h, v, inst.env)
        cond += self.same_element(other, inst, load, reader)
        return conjunction(cond, self.enc.ctx)

    def _overwrite_slot(self, other, inst: Instance, load, reader: Instance) -> list[z3.BoolRef]:
        """A whole-array write (`write_all`): the slot that overwrites is the address read."""
        if other.kind != "write_all":
            return []
        inst.env["slot"] = self.enc.int_term(load.addr, reader.env)
        size = self.enc.nodes[self.view.buffers[other.buffer][1]]
        slot = inst.env["slot"]
        ctx = self.enc.ctx
        return [int_binary("ge", slot, numeral(0, ctx)), int_binary("lt", slot, numeral(size.value, ctx))] \
            if size.op == "const" else []

    def _kills(self, other, h: int, j2, writer: Instance, writer_j, i, same_iter_ok: bool, load,
               reader: Instance) -> z3.BoolRef:
        """`other` runs at iteration j2 of loop h (the writer's thread, same outer iterations)
        after the writer and before the reader, and writes the element the reader reads."""
        given: dict[int, z3.ArithRef] = {}
        claimed: set[int] = set()
        names = self._loop_names(writer.stmt)
        outer = self.loops_of(h)[1]
        reader_loops = self.loops_of(load.stmt)[1]
        for g in self.loops_of(other.stmt)[0]:
            if g == h:
                given[g] = j2
            elif g in outer and self._at_writers_iteration(g, h, reader_loops, writer):
                given[g] = writer.env[f"loop:{g}"]
            elif g in reader_loops:  # outer loops, and inner loops around the reader: its own iteration
                given[g] = reader.env[f"loop:{g}"]
            elif self.view.loops[g].var in names:  # inner loop: the writer's value of the same-named loop
                claimed.add(names[self.view.loops[g].var])
                given[g] = writer.env[f"loop:{names[self.view.loops[g].var]}"]
        given.update(self._same_range_loops(other.stmt, writer, given, claimed))
        inst = self.enc.new_instance(other.stmt, "k", share_block=reader, share_thread=writer, loops=given)
        cond = list(inst.constraints) + self._overwrite_slot(other, inst, load, reader)
        for g, v in given.items():
            cond += self.enc.loop_range(g, v, inst.env)
        cond += self._iteration_order(j2, writer_j, i, same_iter_ok)
        cond += self.same_element(other, inst, load, reader)
        return conjunction(cond, self.enc.ctx)

    @staticmethod
    def _at_writers_iteration(g: int, h: int, reader_loops: frozenset[int], writer: Instance) -> bool:
        """Whether a kill at an iteration of loop h runs in the writer's iteration of loop g
        around h: where the reader is not in g, and wherever the reader is outside h (after the
        loop, or before it in an outer loop's body: the writer's outer iterations run between the
        two, the reader's own would run h after the read)."""
        return (g not in reader_loops or h not in reader_loops) and f"loop:{g}" in writer.env

    def _loop_names(self, stmt: int) -> dict[str, int]:
        """Loop variable name -> header, of the loops around a statement (an inner loop's name wins)."""
        hit = self._names.get(stmt)
        if hit is None:
            hit = self._names[stmt] = {self.view.loops[g].var: g for g in self.loops_of(stmt)[0]}
        return hit

    @staticmethod
    def _iteration_order(j2, writer_j, i, same_iter_ok: bool) -> list[z3.BoolRef]:
        """Iteration j2 of the killing store lies after the writer's and (not after) the reader's:
        `j2 <= i` (or `j2 < i`) and `j2 > writer_j`, for the bounds that exist."""
        out = []
        if i is not None:
            out.append(compare("le" if same_iter_ok else "lt", j2, i))
        if writer_j is not None:
            out.append(compare("gt", j2, writer_j))
        return out

    def _same_range_loops(self, stmt: int, writer: Instance, given: dict[int, z3.ArithRef],
                          claimed: set[int]) -> dict[int, z3.ArithRef]:
        """The inner loops of a killing store left unbound by name, paired innermost first with the
        writer's inner loops of the same range (lo, hi, step) that no name claimed: the part loops a
        vector store is rewritten into get a fresh name per statement (`As_part`, `As_part_`), yet
        the same part of the same thread's vector is the one that overwrites. Any definite value
        keeps the kill a necessary condition (sound); a free one would make it say nothing."""
        theirs = set(self.view.enclosing_loops(stmt))
        free = [g for g in reversed(self.view.enclosing_loops(writer.stmt)) if g not in theirs and g not in claimed]
        out: dict[int, z3.ArithRef] = {}
        for g in reversed(self.view.enclosing_loops(stmt)):
            if g in given:
                continue
            rng = self._range(g)
            match = next((w for w in free if self._range(w) == rng), None)
            if match is None:
                continue
            free.remove(match)
            out[g] = writer.env[f"loop:{match}"]
        return out

    def _range(self, h: int) -> tuple[int, int, int]:
        info = self.view.loops[h]
        return info.lo, info.hi, info.step

    def _slice_group(self, other, load, reader_loops: frozenset[int], h: int) -> Cover | None:
        """The stores (`other` among them) that together overwrite, each iteration of loop h, the
        whole slice of the buffer the load reads through the same coordinates (slice_cover.py);
        None where a loop inside h holds the read too: at the read that iteration has not written
        the whole slice yet, so per-thread kills (in the reader's own inner iteration) stand."""
        if load.buffer != other.buffer or len(load.coords) != len(other.coords):
            return None
        group = self.covers.group(other, h)
        return None if group is None or group.inner & reader_loops else group

    def _slice_kill(self, other, compared: int, h: int, j2, writer: Instance, writer_j, i, same_iter_ok: bool,
                    load, reader: Instance) -> z3.BoolRef:
        """The slice stores at iteration j2 of h (`other`'s group) definitely overwrote the element
        read: they run (guards, range, order) and their slice is the one the element lies in (the
        first `compared` coordinates equal; none when they rewrite the whole buffer)."""
        env = dict(reader.env)
        reader_loops = self.loops_of(load.stmt)[1]
        for g in self.loops_of(h)[0]:
            if self._at_writers_iteration(g, h, reader_loops, writer):
                env[f"loop:{g}"] = writer.env[f"loop:{g}"]
        env[f"loop:{h}"] = j2
        cond = self.enc.loop_range(h, j2, env)
        for c, polarity in self.view.all_guards(other.stmt):
            term = self.enc.bool_term(c, env)
            cond.append(term if polarity else negation(term))
        cond += self._iteration_order(j2, writer_j, i, same_iter_ok)
        cond += [compare("eq", self.enc.int_term(c, env), self.enc.int_term(r, reader.env))
                 for c, r in zip(other.coords[:compared], load.coords[:compared])]
        return conjunction(cond, self.enc.ctx)

    def writer(self, reader: Instance, load_stmt: int, sa: int, carrier: int,
               dist1: int) -> tuple[Instance, list[z3.BoolRef]]:
        """The instance of the store that wrote what `reader` loads, for one reaching_store row."""
        store = self.view.accesses[sa]
        space = self.view.buffers[store.buffer][0]
        reader_loops = set(self.view.enclosing_loops(load_stmt))
        outer = set(self.view.enclosing_loops(carrier)) if carrier else set()
        given: dict[int, z3.ExprRef] = {}
        cons: list[z3.BoolRef] = []
        distance = None
        for h in self.view.enclosing_loops(store.stmt):
            if h in reader_loops and (carrier == 0 or h in outer):
                given[h] = reader.env[f"loop:{h}"]
            elif h == carrier:
                distance = self.enc.int_var(self.enc.fresh(f"dist_{sa}_{h}_"))
                step = self.enc.nodes[self.view.loops[h].step].value
                ctx = self.enc.ctx
                given[h] = int_binary("sub", reader.env[f"loop:{h}"], int_binary("mul", distance, numeral(step, ctx)))
                cons += [int_binary("ge", distance, numeral(1, ctx))] + (
                    [int_binary("eq", distance, numeral(1, ctx))] if dist1 else [])
        w = self.enc.new_instance(store.stmt, "w", share_block=reader if space != "global" else None,
                                  share_thread=reader if space == "local" else None, loops=given)
        if carrier:
            cons += self.enc.loop_range(carrier, given[carrier], w.env)
        return w, cons + w.constraints

    # --------------------------------------------------- matrix instructions
    def operand_instance(self, site: Instance, stmt: int, instr: Instruction, role: str) -> tuple[Instance, z3.ArithRef,
                                                                                                    z3.ArithRef]:
        """An instance of the instruction's statement for one (lane, value slot) of an operand."""
        g, ctx = instr.group_size, self.enc.ctx
        group = int_binary("floordiv", self.enc.linear_thread(site), numeral(g, ctx))
        spec = getattr(instr, role)
        inst = self.enc.new_instance(stmt, role, share_block=site, loops={
            h: site.env[f"loop:{h}"] for h in self.view.enclosing_loops(stmt)}, with_guards=False, slots=spec.values)
        lane, slot = self.enc.ranged_var(self.enc.fresh(f"{role}.lane"), 0, g - 1), inst.env["slot"]
        self.enc.set_linear_thread(inst, int_binary("add", int_binary("mul", group, numeral(g, ctx)), lane))
        inst.constraints = [int_binary("ge", lane, numeral(0, ctx)), int_binary("lt", lane, numeral(g, ctx)),
                            int_binary("ge", slot, numeral(0, ctx)), int_binary("lt", slot, numeral(spec.values, ctx))]
        inst.env["lane"] = lane
        return inst, lane, slot

    def mma_result(self, vid: int, stmt: int, inst: Instance, seen: tuple[int, ...]) -> list[Alt]:
        instr = INSTRUCTIONS[self.view.mma[stmt][0]]
        va, vb, _vc = self.view.value_args[vid]
        lane = int_binary("mod", self.enc.linear_thread(inst), numeral(instr.group_size, self.enc.ctx))
        row = eval_map(instr.c.row, lane, inst.env["slot"])
        col = eval_map(instr.c.col, lane, inst.env["slot"])
        a_inst, la, sa_ = self.operand_instance(inst, stmt, instr, "a")
        b_inst, lb, sb_ = self.operand_instance(inst, stmt, instr, "b")
        cons = a_inst.constraints + b_inst.constraints + [
            compare("eq", eval_map(instr.a.row, la, sa_), row), compare("eq", eval_map(instr.b.col, lb, sb_), col)]
        out: list[Alt] = []
        zeros: list[Alt] = []
        for a in self.value(va, a_inst, seen):
            for b in self.value(vb, b_inst, seen):
                mma_steps = [Step("mma-operand", -1, stmt, "A", a_inst, "A operand")] + a.chain + [
                    Step("mma-operand", -1, stmt, "B", b_inst, "B operand")] + b.chain
                unknown = a.unknown or b.unknown
                if a.zero or b.zero:  # a product with a zero operand contributes nothing to the sum
                    zeros.append(Alt(None, "zero", [], cons + a.constraints + b.constraints, mma_steps, unknown,
                                     zero=True))
                    continue
                if a.tag is None or b.tag is None or not a.tag or not b.tag:
                    out.append(Alt(None, "", [], cons + a.constraints + b.constraints, mma_steps, unknown))
                    continue
                tag = list(a.tag[:-1]) + [b.tag[-1]]
                coords = [as_int(row), as_int(col)]
                out.append(Alt(tag, f"{instr.name}({a.tag_name}, {b.tag_name})", coords,
                               cons + a.constraints + b.constraints, mma_steps, unknown))
        # the result takes its tag from the products that contribute; where a product has a zero
        # operand the result may be a zero (every product of the slot zero): that alternative is
        # kept, so an in-range result the masks zeroed out is not hidden (docs/language.md, Zero tags)
        return out + zeros


def _env_key(inst: Instance) -> tuple:
    """An instance's variables as (name, Z3 term id) pairs: what a kill built from it reads."""
    return tuple(sorted((name, term.get_id()) for name, term in inst.env.items()))
