"""Queries of the memory-discipline obligations: what is stored where, by whom, in which order.

Each method turns one obligation row into Z3 queries (`Query`), like `KernelSolver` does for tag
relations: SAT is a violation with a model naming both instances (block, thread, iterations),
UNSAT for every query proves the obligation. Relations (rules/obligations.dl):

* `stored_tag` - a store into a tagged buffer stores the element the tag names;
* `write_once` - two store instances never write one element of an output;
* `write_count` - the stores into an output are as many as its elements;
* `raw_race` / `war_race` / `async_exposed` - ordering of shared-memory accesses;
* `k_distinct` - one accumulator element never sums the same K tag twice;
* `bank_conflicts` - lanes of one access phase hitting one bank (a performance warning).
"""
from __future__ import annotations

from math import prod

import z3

from ..facts.view import KernelView
from ..hw.dtypes import DTYPE_BYTES
from ..hw.instructions import INSTRUCTIONS
from .chains import Alt, Expander, Step, eval_map, row_of
from .coverage import GuardedCoverage
from .lane_split import lane_grid, loop_values, write_once_proved
from .query import Point, Query
from .raw_terms import _ast_id, _num_args, some_differ, uninterpreted_applications
from .smt import Encoder, Instance

BANKS, BANK_BYTES, PHASE_LANES = 32, 4, 32


def phase_lanes(view, aid: int, width: int) -> int:
    """The lanes of one shared-memory access phase: a phase moves 128 bytes, so 32 lanes of 4-byte
    words, 16 of an 8-byte vector, 8 of a 16-byte one (each part of a vector access is compared
    with the same part of the other lane)."""
    lane_bytes = width * view.vector_lanes.get(aid, 1)
    return min(PHASE_LANES * BANK_BYTES // max(BANK_BYTES, lane_bytes), view.group_size)
ASYNC_CROSSINGS = 4  # rules/invariants/async_copy.dl counts back-edge crossings up to this


class AccessQueries:
    def __init__(self, view: KernelView, enc: Encoder, expander: Expander, derived: dict[str, list[tuple]]):
        self.view, self.enc, self.expander = view, enc, expander
        self.war: dict[tuple[int, int], list[int]] = {}
        for _k, la, sa, carrier in derived.get("war_candidate", []):
            self.war.setdefault((la, sa), []).append(carrier)
        self.guarded = GuardedCoverage(self)
        self.data_guarded = {s for _k, s in view.kf.relation("data_guard")}
        # (load, copy) -> {(carrier, loop h, d back edges of h, loop l left, x back edges of l): least state}
        self.exposed: dict[tuple[int, int], dict[tuple[int, int, int, int, int], int]] = {}
        for _k, la, sa, carrier, st, h, d, left, x in derived.get("async_exposed", []):
            rows = self.exposed.setdefault((la, sa), {})
            key = (carrier, h, d, left, x)
            rows[key] = min(st, rows.get(key, 2))
        self.crossing_cap = ASYNC_CROSSINGS if view.kf.relation("async_wait_group") else 1
        self._store_lanes: dict = {}  # lane_split.write_once_proved's per-store parts
        self._witnesses: dict[int, dict[str, int] | None] = {}  # `bank_witness`, by access

    # ------------------------------------------------------------ helpers
    def _access_alt(self, aid: int, inst: Instance, role: str, coords=None) -> Alt:
        acc = self.view.accesses[aid]
        cs = coords if coords is not None else [self.enc.int_term(c, inst.env) for c in acc.coords]
        return Alt([], "", cs, [], [Step(role, aid, acc.stmt, acc.buffer, inst)])

    def different_group(self, a: Instance, b: Instance) -> z3.BoolRef:
        """The two instances are not ordered by program order: other wave (AMD) / other thread."""
        la, lb = self.enc.linear_thread(a), self.enc.linear_thread(b)
        if self.view.group_kind == "wave":
            return la / self.view.group_size != lb / self.view.group_size
        return la != lb

    def _distinct(self, a: Instance, b: Instance, keys: list[str]) -> z3.BoolRef:
        diffs = [a.env[k] != b.env[k] for k in keys if k in a.env and k in b.env and not a.env[k].eq(b.env[k])]
        return z3.Or(*diffs) if diffs else self.enc.bool_val(False)

    # ------------------------------------------------------ stored tags
    def stored_tag(self, site: int, aid: int) -> list[Query]:
        acc = self.view.accesses[aid]
        inst = self.enc.new_instance(site, "u")
        coords = [self.enc.int_term(c, inst.env) for c in acc.coords]
        name, comps = self.view.tags[acc.buffer]
        env = dict(inst.env)
        env.update({f"arg:{i}": c for i, c in enumerate(coords)})
        expected = Alt([self.enc.int_term(c, env) for c in comps], name, coords, [],
                       [Step("store", aid, acc.stmt, acc.buffer, inst)])
        out = []
        for alt in self.expander.value(self.view.store_value[aid], inst):
            if alt.tag is None or len(alt.tag) != len(expected.tag):
                violated = self.enc.bool_val(True)
            else:
                violated = some_differ(alt.tag, expected.tag)
            out.append(Query.joined((inst.constraints, alt.constraints), violated, alt, expected, inst, inst, inst))
        return out

    def outside_views(self, site: int, aid: int) -> list[Query]:
        """A store through one alias of a storage lands in no tagged subview of it but its own. A
        moving subview (base -1) is not one of them: its loads follow their stores (no roots,
        rules/provenance.dl), so what another alias stores there is checked where it is used."""
        acc = self.view.accesses[aid]
        storage = self.view.aliases.get(acc.buffer, (acc.buffer, 0))[0]
        inst = self.enc.new_instance(site, "u")
        addr = self.enc.int_term(acc.addr, inst.env)
        inside = []
        for v, (s, base) in sorted(self.view.aliases.items()):
            if s == storage and v != acc.buffer and v in self.view.tags and base >= 0:
                size = self.enc.int_term(self.view.buffers[v][1], inst.env)
                inside.append(z3.And(addr >= base, addr < base + size))
        alt = self._access_alt(aid, inst, "store")
        return [Query(list(inst.constraints), z3.Or(*inside) if inside else self.enc.bool_val(False), alt, alt,
                      inst, inst, inst, {"addr": addr})]

    # ---------------------------------------------------- output coverage
    def write_once(self, a1: int, a2: int) -> list[Query]:
        if write_once_proved(self.enc, a1, a2, self._store_lanes):
            return []  # decided by enumerating lanes (lane_split.py): no query for Z3
        s1, s2 = self.view.accesses[a1], self.view.accesses[a2]
        i1 = self.enc.new_instance(s1.stmt, "w1")
        i2 = self.enc.new_instance(s2.stmt, "w2")
        c1 = [self.enc.int_term(c, i1.env) for c in s1.coords]
        c2 = [self.enc.int_term(c, i2.env) for c in s2.coords]
        same = [x == y for x, y in zip(c1, c2)]
        if a1 == a2:
            keys = [k for k in i1.env if k != "slot" or s1.kind == "write_all"]
            same.append(self._distinct(i1, i2, keys))
        return [Query(i1.constraints + i2.constraints + same, self.enc.bool_val(True),
                      self._access_alt(a1, i1, "store", c1), self._access_alt(a2, i2, "store", c2), i2, i1, i2)]

    def write_count(self, site: int, aid: int) -> list[Query]:
        buf = self.view.accesses[aid].buffer
        stores = [a for a in self.view.accesses.values() if a.buffer == buf and a.kind == "store"]
        inst = self.enc.new_instance(site, "u")
        if any(st.stmt in self.data_guarded for st in stores):
            return [self._posed_unknown(aid, inst, "a store into the output runs under a condition on data: whether "
                                                   "every element is written depends on the values")]
        if len(stores) == 1:
            return self.guarded.write_count(stores[0], inst)
        if any(self.view.all_guards(st.stmt) for st in stores):
            return [self._posed_unknown(aid, inst, "several stores into the output, some of them guarded: "
                                                   "guarded coverage is proved for one store")]
        total = self.enc.int_val(0)
        for st in stores:
            count = self.instance_count(st.stmt)
            if count is None:
                return [self._posed_unknown(aid, inst, "a loop around an output store has bounds that depend on "
                                                       "other loops")]
            total = total + count
        return [self.count_query(aid, inst, total, total != self.elements(buf))]

    def elements(self, buf: str) -> z3.ArithRef:
        out = self.enc.int_val(1)
        for e in self.view.dims[buf]:
            out = out * self.enc.int_term(e, {})
        return out

    def count_query(self, aid: int, inst: Instance, total: z3.ArithRef, violated: z3.BoolRef) -> Query:
        """Store instances against elements: a model is a size at which they differ as `violated` says."""
        buf = self.view.accesses[aid].buffer
        lhs = Alt([], "", [total], [], [Step("store", aid, self.view.accesses[aid].stmt, buf, inst)])
        rhs = Alt([], "", [self.elements(buf)], [], [])
        return Query([], violated, lhs, rhs, inst, inst, inst)

    def instance_count(self, stmt: int) -> z3.ArithRef | None:
        """Executions of `stmt` without its guards: blocks x threads x trip counts (None: a loop
        whose bounds depend on another loop)."""
        count = self.enc.int_val(self.enc.block_size())
        for grid, _b in self.view.launch:
            count = count * self.enc.int_term(grid, {})
        for h in self.view.enclosing_loops(stmt):
            trip = self._trip_count(h)
            if trip is None:
                return None
            count = count * trip
        return count

    def _trip_count(self, h: int) -> z3.ArithRef | None:
        info = self.view.loops[h]
        try:
            lo, hi = self.enc.int_term(info.lo, {}), self.enc.int_term(info.hi, {})
        except KeyError:
            return None
        step = self.enc.nodes[info.step].value
        return z3.If(hi > lo, (hi - lo + step - 1) / step, 0)

    def _posed_unknown(self, aid: int, inst: Instance, why: str) -> Query:
        alt = self._access_alt(aid, inst, "store", [])
        return Query([], self.enc.bool_val(True), alt, alt, inst, inst, inst, unknown=why)

    # ------------------------------------------------- memory ordering
    def raw_race(self, la: int, sa: int) -> list[Query]:
        load = self.view.accesses[la]
        out = []
        for sa_, carrier, barrier, dist1 in self.expander.reaching.get(la, []):
            if sa_ != sa or barrier:
                continue
            reader = self.enc.new_instance(load.stmt, "r")
            writer, cons = self.expander.writer(reader, load.stmt, sa, carrier, dist1)
            cons += self.expander.same_element(self.view.accesses[sa], writer, load, reader)
            out.append(Query(reader.constraints + cons, self.different_group(reader, writer),
                             self._access_alt(la, reader, "load"), self._access_alt(sa, writer, "store"),
                             reader, reader, writer))
        return out

    def war_race(self, la: int, sa: int) -> list[Query]:
        load, store = self.view.accesses[la], self.view.accesses[sa]
        out = []
        for carrier in sorted(set(self.war.get((la, sa), []))):
            reader = self.enc.new_instance(load.stmt, "r")
            writer, cons = self.later_writer(reader, load.stmt, store, carrier)
            cons += self.expander.same_element(store, writer, load, reader)
            out.append(Query(reader.constraints + cons, self.different_group(reader, writer),
                             self._access_alt(la, reader, "load"), self._access_alt(sa, writer, "store"),
                             reader, reader, writer))
        return out

    def later_writer(self, reader: Instance, load_stmt: int, store, carrier: int) -> tuple[Instance, list]:
        """A store instance after the load: same iteration (carrier 0) or the next one of `carrier`."""
        reader_loops = set(self.view.enclosing_loops(load_stmt))
        outer = set(self.view.enclosing_loops(carrier)) if carrier else set()
        given: dict[int, z3.ExprRef] = {}
        for h in self.view.enclosing_loops(store.stmt):
            if h in reader_loops and (carrier == 0 or h in outer):
                given[h] = reader.env[f"loop:{h}"]
            elif h == carrier:
                given[h] = reader.env[f"loop:{h}"] + self.enc.nodes[self.view.loops[h].step].value
        w = self.enc.new_instance(store.stmt, "w", share_block=reader, loops=given)
        cons = list(w.constraints)
        if carrier:
            cons += self.enc.loop_range(carrier, given[carrier], w.env)
        return w, cons

    def async_exposed(self, la: int, sa: int) -> list[Query]:
        load = self.view.accesses[la]
        out = []
        for (carrier, h, crossed, left, after), state in sorted(self.exposed.get((la, sa), {}).items()):
            dist1 = next((d for s, c, _b, d in self.expander.reaching.get(la, []) if s == sa and c == carrier), 0)
            reader = self.enc.new_instance(load.stmt, "r")
            writer, cons = self.expander.writer(reader, load.stmt, sa, carrier, dist1)
            cons += self.expander.same_element(self.view.accesses[sa], writer, load, reader)
            cons += self._crossings(reader, writer, carrier, h, crossed) + self._remaining(writer, left, after)
            # state 0: no async_wait on some path, whoever copied; 1: waited, but not published by a barrier
            violated = self.enc.bool_val(True) if state == 0 else self.different_group(reader, writer)
            out.append(Query(reader.constraints + cons, violated, self._access_alt(la, reader, "load"),
                             self._access_alt(sa, writer, "store"), reader, reader, writer,
                             {"state": self.enc.int_val(state)}))
        return out

    def _crossings(self, reader: Instance, writer: Instance, carrier: int, h: int, crossed: int) -> list:
        """The path state of an async_exposed row holds for instances `crossed` iterations of loop h
        apart: the copy's (carrier h) or the loop's first (h entered after the copy). The rules count
        up to ASYNC_CROSSINGS with copy groups, else to 1; the cap stands for "at least"."""
        if h == 0:
            return []
        step = self.enc.nodes[self.view.loops[h].step].value
        i = reader.env[f"loop:{h}"]
        start = writer.env[f"loop:{h}"] if carrier == h else self.enc.int_term(self.view.loops[h].lo, reader.env)
        gap = i - start
        return [gap >= crossed * step] if crossed >= self.crossing_cap else [gap == crossed * step]

    def _remaining(self, writer: Instance, loop: int, after: int) -> list:
        """The copy ran with `after` more iterations of loop `loop` to go (a path that left it after
        crossing its back edge that often); the count stands for "at least" at the cap."""
        if loop == 0:
            return []
        step = self.enc.nodes[self.view.loops[loop].step].value
        j = writer.env[f"loop:{loop}"]
        hi = self.enc.int_term(self.view.loops[loop].hi, writer.env)
        more = [j + after * step < hi]
        return more if after >= self.crossing_cap else more + [j + (after + 1) * step >= hi]

    # ------------------------------------------------ row statistics
    def broadcast(self, site: int, full: int, stat: int, same_length: bool = False) -> list[Query]:
        """A statistic meeting a full value is the statistic of that value's row: its tag is a
        prefix of the value's tag without the component the statistic dropped; two statistics
        combined (`same_length`) are of the same row and dropped the same component."""
        inst = self.enc.new_instance(site, "u")
        out = []
        for left in self.expander.value(full, inst):
            for right in self.expander.value(stat, inst):
                if left.tag is None or right.tag is None:
                    continue  # an untagged start value (e.g. -inf) meets the row: nothing to compare
                want = left.tag if same_length else _without(left.tag, right)
                if want is None or len(right.tag) > len(want) or (same_length and (
                        len(right.tag) != len(want) or (left.stat and right.stat and left.dropped != right.dropped))):
                    violated = self.enc.bool_val(True)
                else:
                    violated = some_differ(right.tag, want) if right.tag else \
                        self.enc.bool_val(False)
                out.append(Query.joined((inst.constraints, left.constraints, right.constraints), violated, left,
                                        right, inst, inst, inst))
        return out

    def reduce_uniform(self, site: int, reduced: int, arg: int) -> list[Query]:
        """Two lanes of one reduction group (two slots of a slot reduction) hold elements of the same row."""
        if reduced in self.expander.slot_axis:  # two slots reduced into one output slot
            base = self.enc.new_instance(site, "s", slots=self.expander.slot_axis[reduced][1])
            out = base.env["slot"]
            first, in1 = self.expander.reduced_slot(base, reduced)
            second, in2 = self.expander.reduced_slot(base, reduced)
            cons = base.constraints + in1 + in2 + [out >= 0, out < self.expander.slot_axis[reduced][1]]
            return self._same_rows(arg, first, second, cons, {"slot1": first.env["slot"], "slot2": second.env["slot"]},
                                   self.expander.drops.get(reduced, -1))
        if reduced in self.expander.slot_reduce:
            slots = self.expander.slot_reduce[reduced]
            first = self.enc.new_instance(site, "s1")
            first.constraints += [first.env["slot"] >= 0, first.env["slot"] < slots]
            second, in_range = self.expander.other_slot(first, slots)
            return self._same_rows(arg, first, second, first.constraints + in_range,
                                   {"slot1": first.env["slot"], "slot2": second.env["slot"]},
                                   self.expander.drops.get(reduced, -1))
        if reduced in self.expander.butterfly:  # own at this lane and at the butterfly partner
            partner = self.expander.butterfly[reduced][1]
            first = self.enc.new_instance(site, "l1")
            second = self.expander.other_thread(first, self.expander.lane_source[partner])
            return self._same_rows(arg, first, second, list(first.constraints),
                                   drops=self.expander.drops.get(reduced, -1))
        width = self.expander.lane_reduce[reduced]
        first = self.enc.new_instance(site, "l1")
        second = self.enc.new_instance(site, "l2", share_block=first, loops={
            h: first.env[f"loop:{h}"] for h in self.view.enclosing_loops(site)})
        t1, t2 = self.enc.linear_thread(first), self.enc.linear_thread(second)
        return self._same_rows(arg, first, second, first.constraints + second.constraints + [t1 / width == t2 / width],
                               drops=self.expander.drops.get(reduced, -1))

    def _same_rows(self, arg: int, first: Instance, second: Instance, cons: list[z3.BoolRef],
                   extras: dict | None = None, drops: int = -1) -> list[Query]:
        """The operand at two instances (lanes or slots) holds elements of one row: tags equal but
        for the dropped component (`drops`; statistics: equal, having dropped the same one)."""
        out = []
        for x in self.expander.value(arg, first):
            for y in self.expander.value(arg, second):
                rx, ry = row_of(x, drops), row_of(y, drops)
                if rx.tag is None or ry.tag is None or len(rx.tag) != len(ry.tag):
                    continue
                if rx.dropped != ry.dropped:
                    violated = self.enc.bool_val(True)
                elif not rx.tag:
                    continue
                else:
                    violated = some_differ(rx.tag, ry.tag)
                out.append(Query.joined((cons, x.constraints, y.constraints), violated, x, y, first, first, second,
                                        dict(extras or {})))
        return out

    # -------------------------------------------------- K coverage
    def k_distinct(self, site: int, va: int) -> list[Query]:
        instr = INSTRUCTIONS[self.view.mma[site][0]]
        first = self.enc.new_instance(site, "u1")
        fixed = self._accumulation_boundary(site)
        second = self.enc.new_instance(site, "u2", share_block=first, share_thread=first, loops={
            h: first.env[f"loop:{h}"] for h in self.view.enclosing_loops(site) if h in fixed})
        second.env["slot"] = first.env["slot"]
        g = instr.group_size
        sides = []
        for base in (first, second):
            lane = self.enc.linear_thread(base) % g
            row = eval_map(instr.c.row, lane, base.env["slot"])
            a_inst, la, sla = self.expander.operand_instance(base, site, instr, "a")
            a_inst.constraints.append(eval_map(instr.a.row, la, sla) == row)
            sides.append((base, a_inst, eval_map(instr.a.col, la, sla)))
        (b1, i1, k1), (b2, i2, k2) = sides
        loops = [f"loop:{h}" for h in self.view.enclosing_loops(site) if h not in fixed]
        distinct = z3.Or(self._distinct(b1, b2, loops), k1 != k2)
        cons = b1.constraints + b2.constraints + i1.constraints + i2.constraints + [
            b1.env["slot"] >= 0, b1.env["slot"] < instr.c.values, distinct]
        out = []
        for x in self.expander.value(va, i1):
            for y in self.expander.value(va, i2):
                if x.tag is None or y.tag is None or not x.tag or not y.tag:
                    continue  # an untagged operand is reported by ave/mma-k-pairing
                out.append(Query.joined((cons, x.constraints, y.constraints), x.tag[-1] == y.tag[-1], x, y, b1, i1,
                                        i2, {"k1": k1, "k2": k2, "slot": b1.env["slot"]}))
        return out

    def _accumulation_boundary(self, site: int) -> set[int]:
        """Loops whose iterations start a new accumulation: those around any other write of the
        accumulator (its initialisation, a reset) than the instruction's own result."""
        _instr, _va, _vb, vc, d = self.view.mma[site]
        bufs = {self.view.accesses[d].buffer}
        if self.view.values[vc][0] == "load":
            bufs.add(self.view.accesses[self.view.value_load[vc]].buffer)
        fixed: set[int] = set()
        for a in self.view.accesses.values():
            if a.buffer in bufs and a.kind in ("store", "write_all") and a.aid != d:
                fixed.update(self.view.enclosing_loops(a.stmt))
        return fixed

    # ------------------------------------------------ bank conflicts
    def _bank_witness(self, acc, width: int, phase: int) -> dict[str, int] | None:
        """Enumerate every phase when the address depends only on the thread and on loops with
        constant bounds (swizzles make the Z3 query slow): {} = conflict-free, a witness (two
        threads and the loop values) otherwise, None = not enumerable (Z3 decides). A remainder
        of a symbolic loop's variable (a pipeline stage, `(kt // 32) % 2`), not of the thread id,
        is enumerated over every value it may take (hw.expr.residues): a superset of the
        executed points, so it proves a conflict-free access (e.g. the ldmatrix reads of
        speed/gemm_mma_pipelined.ave, 1-2.4 s each in Z3), and a conflict it finds may never run:
        its witness then carries the remainders' values ("residue:<node>"), for `bank_conflicts`
        to ask Z3 that conflict first. A guard that reads only thread ids and the loops
        enumerated is evaluated too, and only the lanes it lets run are compared (a wave
        specialisation's `tid // 64 < 4`: production attention's 16 guarded conflicts, each left
        to Z3 before, now certain); any other guard is left out the same way as a remainder: it
        only takes lanes and iterations away, and no two lanes of a phase that all run conflict
        when they do not (production attention's 21 guarded accesses, each left to Z3 before)."""
        import numpy as np

        from ..hw.expr import evaluate, residues

        table = self.view.kf.table
        loops = {f"loop:{h}": loop_values(self.enc, h) for h in self.view.enclosing_loops(acc.stmt)}
        if acc.stmt in self.view.slot_range:  # an ldmatrix: both lanes read one register slot, as a loop's value
            loops["slot"] = range(self.view.slot_range[acc.stmt])

        def enumerable(name: str) -> bool:
            values = loops.get(name)
            return name.startswith("tid:") or (values is not None and len(values) <= 4096)

        found_residues = residues(table, acc.addr, enumerable, lambda name: name.startswith("tid:"))
        if found_residues is None:
            return None
        stages, names = found_residues
        axes: list[tuple[str, np.ndarray]] = []
        for name in sorted(names & set(loops)):
            values = loops[name]
            axes.append((name, np.arange(values.start, values.stop, values.step)))  # type: ignore[union-attr]
        axes += [(f"residue:{node}", np.arange(m)) for node, m in sorted(stages.items())]
        if prod(a.size for _, a in axes) > 4096:
            return None
        env, shape = lane_grid(self.enc, axes)  # every loop point at once: rows loop points, columns threads
        given = {node: env[f"residue:{node}"] for node in stages}
        words = np.broadcast_to(np.asarray(evaluate(table, acc.addr, env, given), dtype=np.int64) * width
                                // BANK_BYTES, shape)
        active = np.ones(shape, dtype=bool)
        for cond, polarity in self.view.all_guards(acc.stmt):
            if self._guard_enumerated(cond, env.keys()):
                active &= np.broadcast_to(np.asarray(evaluate(table, cond, env)) != 0, shape) == bool(polarity)
        found = _first_conflicting_phase(words, phase, active)
        if found is None:
            return {}
        row, start = found
        w, runs = words[row, start:start + phase], active[row, start:start + phase]
        banks = w % BANKS
        for bank in np.unique(banks[runs]):  # the witness: the lowest conflicting bank, its two lowest words
            distinct = np.unique(w[runs & (banks == bank)])
            if distinct.size > 1:
                lanes = [int(np.argmax(runs & (w == x))) + start for x in distinct[:2]]
                return {"t1": lanes[0], "t2": lanes[1], **{k: int(env[k][row, 0]) for k, _ in axes}}
        raise AssertionError("a conflicting phase without a conflicting bank")

    def _guard_enumerated(self, cond: int, names) -> bool:
        """Whether the enumeration decides a guard itself: it reads only thread ids and the
        loops enumerated (`names`); any other (a size, a symbolic loop, data) it leaves out."""
        from ..hw.expr import symbols

        return symbols(self.view.kf.table, cond) <= set(names)

    def _guards_left(self, stmt: int, witness: dict[str, int]) -> bool:
        """Whether a guard of the statement was left out of the enumeration that found `witness`
        (its conflict may then never run)."""
        names = set(_axis_values(witness)) | {f"tid:{d}" for d in range(len(self.enc.block_dims()))}
        return any(not self._guard_enumerated(cond, names) for cond, _pol in self.view.all_guards(stmt))

    def bank_frame(self, first: Instance) -> tuple[z3.BoolRef, ...]:
        """A bank point's first frame: the kernel's assumptions and the first lane's block ranges."""
        return tuple(self.enc.base_constraints() + first.constraints[:first.launch])

    def _bank_point(self, first: Instance, second: Instance, witness: dict[str, int]) -> Point:
        """The enumeration's witness as a Point: both lanes' thread ids, the loop values and the
        register slot (the second lane's block and loops are the first's; a remainder the
        witness names is no variable: the query's own constraint on it is checked), framed by
        the kernel's assumptions and the first lane's block ranges, then by its loop ranges and
        the guards that read no thread id or slot."""
        dims = self.enc.block_dims()
        pinned = [(inst.env[f"tid:{d}"], value) for inst, lane in ((first, witness["t1"]), (second, witness["t2"]))
                  for d, value in enumerate(_thread_ids(lane, dims))]
        pinned += [(first.env[k], v) for k, v in _axis_values(witness).items()]
        starts = tuple((first.env[f"loop:{h}"], self.enc.int_term(self.view.loops[h].lo, first.env))
                       for h in self.view.enclosing_loops(first.stmt) if f"loop:{h}" not in witness)
        pinned = [(term, value) for term, value in pinned if z3.is_const(term) and not z3.is_int_value(term)]
        frame = self.bank_frame(first)
        lanes = {first.env[k].get_id() for k in first.env if k.startswith("tid:") or k == "slot"}
        c = self.enc.ctx.ref()
        uniform = [g for g in first.constraints[first.ranges:]  # no thread, slot or data read
                   if not any(_ast_id(c, a) in lanes or _num_args(c, a) for a in uninterpreted_applications([g]))]
        return Point(tuple(pinned), frame, starts, frame + tuple(first.constraints[first.launch:first.ranges] + uniform))

    def bank_witness(self, aid: int) -> dict[str, int] | None:
        """`_bank_witness` of the access, enumerated once per check (KernelSolver asks before it
        forks helpers whether any access conflicts; the helpers inherit the answers)."""
        if aid not in self._witnesses:
            self._witnesses[aid] = self._bank_witness(self.view.accesses[aid], *self.bank_unit(aid))
        return self._witnesses[aid]

    def bank_unit(self, aid: int) -> tuple[int, int]:
        """The access's element width in bytes and the lanes of one of its phases."""
        width = DTYPE_BYTES.get(self.view.dtypes.get(self.view.accesses[aid].buffer, "f32"), 4)
        return width, phase_lanes(self.view, aid, width)

    def bank_conflicts(self, aid: int) -> list[Query]:
        acc = self.view.accesses[aid]
        width, phase = self.bank_unit(aid)
        witness = self.bank_witness(aid)
        if witness == {}:
            return []  # enumerated: no phase of this access has a conflict (no instance built)
        first = self.enc.new_instance(acc.stmt, "p1")
        second = self.enc.new_instance(acc.stmt, "p2", share_block=first, loops={
            h: first.env[f"loop:{h}"] for h in self.view.enclosing_loops(acc.stmt)})
        if acc.stmt in self.view.slot_range:  # an ldmatrix: compare lanes of one register slot
            second.env["slot"] = first.env["slot"]
        t1, t2 = self.enc.linear_thread(first), self.enc.linear_thread(second)
        w1 = self.enc.int_term(acc.addr, first.env) * width / BANK_BYTES
        w2 = self.enc.int_term(acc.addr, second.env) * width / BANK_BYTES
        cons = first.constraints + second.constraints + [t1 / phase == t2 / phase]
        pinned, point = [], None
        if witness:
            pinned = [t1 == witness["t1"], t2 == witness["t2"]] + [
                first.env[k] == v for k, v in _axis_values(witness).items()] + [
                self.enc.int_term(int(k.split(":", 1)[1]), first.env) == v for k, v in witness.items()
                if k.startswith("residue:")]
            point = self._bank_point(first, second, witness)
        violated = z3.And(w1 != w2, w1 % BANKS == w2 % BANKS)

        def query(extra: list, hint: bool = False, certain: bool = False) -> Query:
            return Query(cons + extra, violated, self._access_alt(aid, first, acc.kind),
                         self._access_alt(aid, second, acc.kind), first, first, second, {"word1": w1, "word2": w2},
                         hint=hint, certain=certain, point=point if extra else None)

        if not witness:  # not enumerable: Z3 decides the access whole
            return [query([])]
        # the enumeration's conflict, asked first, pinned, as a hint (Z3 confirms it quickly:
        # gemm_mfma_mi300x's four staged A reads, 25 -> 3 ms each), then the access whole, which
        # decides unless the hint was SAT. Certain (its model made at once) when no stage and no
        # guard was left out of the enumeration; still a hint: should Z3's encoding disagree
        # with the enumeration's evaluation, the whole access decides, not the pinned query's
        # UNSAT (a review found `t // -8` rounded otherwise by Z3: VERIFIED where it conflicts)
        certain = not (self._guards_left(acc.stmt, witness) or any(k.startswith("residue:") for k in witness))
        return [query(pinned, hint=True, certain=certain), query([])]


def _axis_values(witness: dict[str, int]) -> dict[str, int]:
    """The witness's loop values and register slot (the axes its enumeration ran over)."""
    return {k: v for k, v in witness.items() if k.startswith("loop:") or k == "slot"}


def _thread_ids(linear: int, dims: list[int]) -> list[int]:
    """A linear thread id as its per-dimension ids (the first dimension fastest, as
    `Encoder.linear_thread` composes them)."""
    out = []
    for extent in dims:
        out.append(linear % extent)
        linear //= extent
    return out


def _first_conflicting_phase(words, phase: int, active=None) -> tuple[int, int] | None:
    """(loop point, first lane) of the first phase, in loop-point then lane order, in which two
    lanes that run (`active`, every lane when None) access different words of one bank; None when
    there is none. Vectorised: within each phase, (bank, word) pairs sorted, a bank followed by
    itself with another word conflicts; a lane that does not run takes the word of the phase's
    first lane that does (a word already there adds no conflict)."""
    import numpy as np

    rows, lanes = words.shape
    if words.size == 0:  # a loop that never runs: no phase executes the access
        return None
    pad = (-lanes) % phase
    if pad:  # a last, partial phase: repeat its first lane (same word: no conflict added)
        words = np.concatenate([words, np.repeat(words[:, lanes - lanes % phase:][:, :1], pad, axis=1)], axis=1)
        if active is not None:
            active = np.concatenate([active, np.zeros((rows, pad), dtype=bool)], axis=1)
    w = words.reshape(rows, -1, phase)
    if active is not None and not active.all():
        runs = active.reshape(rows, -1, phase)
        w = np.where(runs, w, np.take_along_axis(w, runs.argmax(axis=-1)[..., None], axis=-1))
    low = w.min()
    key = (w % BANKS) * (w.max() - low + 1) + (w - low)
    key.sort(axis=-1)
    span = w.max() - low + 1
    bank = key // span
    conflict = ((bank[..., 1:] == bank[..., :-1]) & (key[..., 1:] != key[..., :-1])).any(axis=-1)
    hits = np.argwhere(conflict)
    if hits.size == 0:
        return None
    row, p = (int(x) for x in hits[0])
    return row, p * phase


def _without(tag: list, stat: Alt) -> list | None:
    """A full value's tag without the component `stat` dropped (its row, as the statistic states
    it); None when the tag has no such component. Without a known dropped component: the last."""
    if stat.dropped < 0:
        return tag[:-1]
    return tag[:stat.dropped] + tag[stat.dropped + 1:] if stat.dropped < len(tag) else None
