"""`barrier_match` (ave/barrier-divergence): two threads of one block that take different arms of an
`if` reach as many block barriers inside it; `arm_race`: a load and a store of different arms fall
in different barrier intervals. The counts are closed forms (intervals.py).
"""
from __future__ import annotations

import z3

from ..report.model import ChainPoint, Location, Side
from .chains import Alt, Step
from .intervals import BarrierCount
from .query import Query

# relations whose counterexample is two paths (`path` sides): arms, runs of a loop, lanes that run
PATH_RELATIONS = ("barrier_match", "barrier_trips", "lanes_converged")


def path_message(relation: str, c, first_thread: int | None, other_thread: int | None) -> str:
    lhs, rhs = c.lhs, c.rhs
    if relation == "lanes_converged":
        return (f"thread {first_thread} runs this statement but thread {other_thread} of the same {c.group_kind} "
                f"does not: the exchange (or matrix instruction) reads lanes that did not compute their value")
    if relation == "barrier_trips":
        return (f"thread {first_thread} runs this loop {lhs.tag[0]} time(s) and thread {other_thread} of the same "
                f"block {rhs.tag[0]}: the loop holds a barrier, so they reach different numbers of barriers (a hang)")
    return (f"thread {first_thread} takes the then arm and reaches {lhs.tag[0]} barrier(s) in it; thread "
            f"{other_thread} of the same block takes the else arm and reaches {rhs.tag[0]}: the block's threads "
            f"wait at different barriers (a hang, or barriers of different program points paired)")


class BarrierQueries(BarrierCount):
    def barrier_match(self, site: int) -> list[Query]:
        first = self.enc.new_instance(site, "t1")
        loops = {h: first.env[f"loop:{h}"] for h in self.view.enclosing_loops(site)}
        second = self.enc.new_instance(site, "t2", share_block=first, loops=loops)
        cons = first.constraints + second.constraints
        cond = self.view.branch_cond.get(site, -1)
        if cond >= 0:  # a condition on data: any thread may take either arm
            cons += [self.enc.bool_term(cond, first.env), z3.Not(self.enc.bool_term(cond, second.env))]
        sides = []
        for arm, inst in ((1, first), (0, second)):
            total, steps = self.enc.int_val(0), []
            for b in self.barriers_in(site, arm):
                times, why = self._times(site, b, inst)
                if why:
                    return [Query(cons, self.enc.bool_val(True), Alt(None, "", [], [], []), Alt(None, "", [], [], []),
                                  first, first, second, unknown=why)]
                total = total + times
                steps.append((Step("barrier", -1, b, "", inst), times))
            sides.append((total, steps))
        (count1, steps1), (count2, steps2) = sides
        lhs = Alt([count1], "then", [], [], [s for s, _ in steps1])
        rhs = Alt([count2], "else", [], [], [s for s, _ in steps2])
        extras = {f"times{i}:{j}": t for i, steps in ((1, steps1), (2, steps2)) for j, (_s, t) in enumerate(steps)}
        return [Query(cons, count1 != count2, lhs, rhs, first, first, second, extras)]

    def barrier_trips(self, header: int) -> list[Query]:
        """Two threads of one block that run the loop (same outer iterations) run it equally often."""
        first = self.enc.new_instance(header, "t1")
        loops = {h: first.env[f"loop:{h}"] for h in self.view.enclosing_loops(header)}
        second = self.enc.new_instance(header, "t2", share_block=first, loops=loops)
        counts = [self._trips(header, inst) for inst in (first, second)]
        steps = [Step("barrier", -1, header, "", inst) for inst in (first, second)]
        lhs = Alt([counts[0]], "trips", [], [], [steps[0]])
        rhs = Alt([counts[1]], "trips", [], [], [steps[1]])
        return [Query(first.constraints + second.constraints, counts[0] != counts[1], lhs, rhs, first, first, second,
                      {"times1:0": counts[0], "times2:0": counts[1]})]

    def arm_race(self, la: int, sa: int, shared: "object") -> list[Query]:
        """A load and a store of the other arm of an `if`, by threads of other waves (threads) of the
        block at the same execution of the `if`, touch one element in the same barrier interval."""
        load, store = self.view.accesses[la], self.view.accesses[sa]
        branch, arm_l, arm_s = self._split(load.stmt, store.stmt)
        reader = self.enc.new_instance(load.stmt, "r")
        loops = {h: reader.env[f"loop:{h}"] for h in self.view.enclosing_loops(branch)}
        writer = self.enc.new_instance(store.stmt, "w", share_block=reader, loops=loops)
        bl, why_l = self.barriers_before(branch, arm_l, load.stmt, reader)
        bs, why_s = self.barriers_before(branch, arm_s, store.stmt, writer)
        cons = reader.constraints + writer.constraints
        lhs, rhs = shared._access_alt(la, reader, "load"), shared._access_alt(sa, writer, "store")
        if why_l or why_s:
            return [Query(cons, self.enc.bool_val(True), lhs, rhs, reader, reader, writer, unknown=why_l or why_s)]
        cons = cons + shared.expander.same_element(store, writer, load, reader) + [bl == bs]
        return [Query(cons, shared.different_group(reader, writer), lhs, rhs, reader, reader, writer,
                      {"interval": bl})]

    def _split(self, a: int, b: int) -> tuple[int, int, int]:
        """The `if` at which statements a and b take different arms, and their arms."""
        arms_b = dict(self.view.in_branch.get(b, []))
        for br, pol in self.view.in_branch.get(a, []):
            if br in arms_b and arms_b[br] != pol:
                return br, pol, arms_b[br]
        raise ValueError("the two statements are not in different arms of one if")

    def lanes_converged(self, site: int) -> list[Query]:
        """A thread runs `site` (its guards hold): so does every lane of its warp/wave."""
        first = self.enc.new_instance(site, "c1")
        loops = {h: first.env[f"loop:{h}"] for h in self.view.enclosing_loops(site)}
        second = self.enc.new_instance(site, "c2", share_block=first, loops=loops, with_guards=False)
        g = self.view.group_size
        same_group = self.enc.linear_thread(first) / g == self.enc.linear_thread(second) / g
        runs = [self.enc.bool_term(c, second.env) if pol else z3.Not(self.enc.bool_term(c, second.env))
                for c, pol in self.view.all_guards(site)]
        lhs = Alt([self.enc.int_val(1)], "runs", [], [], [Step("barrier", -1, site, "", first)])
        rhs = Alt([z3.If(z3.And(*runs), 1, 0)], "runs", [], [], [Step("barrier", -1, site, "", second)])
        return [Query(first.constraints + second.constraints + [same_group], z3.Not(z3.And(*runs)), lhs, rhs,
                      first, first, second)]

    def sides(self, q: Query, ev, iterations) -> tuple[Side, Side]:
        """The two paths of a counterexample: each thread's arm (or run of the loop) and the
        barriers it reaches."""
        loop = q.lhs.tag_name == "trips"
        if q.lhs.tag_name == "runs":  # lane convergence: a lane that runs the statement, one that does not
            out = []
            for i, (alt, inst) in enumerate(((q.lhs, q.lhs_inst), (q.rhs, q.rhs_inst))):
                thread = ev(self.enc.linear_thread(inst))
                note = "runs it" if i == 0 else "does not run it (a condition around it is false there)"
                out.append(Side("lane" if i == 0 else "other lane of the group", thread % self.view.group_size, None,
                                [], "runs", [ev(alt.tag[0])],
                                [ChainPoint("branch", Location.of(self.view.span(q.site.stmt)), "", thread,
                                            iterations(inst, ev), note)], "path"))
            return out[0], out[1]
        out = []
        for i, (alt, inst, arm) in enumerate(((q.lhs, q.lhs_inst, "then"), (q.rhs, q.rhs_inst, "else")), 1):
            thread = ev(self.enc.linear_thread(inst))
            where = Location.of(self.view.span(q.site.stmt))
            if loop:
                chain = [ChainPoint("branch", where, "", thread, iterations(inst, ev),
                                    f"runs the loop {ev(alt.tag[0])} time(s)")]
                label = "first thread" if i == 1 else "other thread"
            else:
                chain = [ChainPoint("branch", where, "", thread, iterations(inst, ev), f"takes the {arm} arm")]
                for j, step in enumerate(alt.chain):
                    chain.append(ChainPoint("barrier", Location.of(self.view.span(step.stmt)), "", thread,
                                            iterations(inst, ev), f"reached {ev(q.extras[f'times{i}:{j}'])} time(s)"))
                label = f"{arm} arm"
            out.append(Side(label, thread % self.view.group_size, None, [], "barriers", [ev(alt.tag[0])],
                            chain, "path"))
        return out[0], out[1]
