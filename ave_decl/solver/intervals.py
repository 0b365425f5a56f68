"""Barrier intervals: how many block barriers of an arm of an `if` a thread has passed, in closed
form over the instance (ave/barrier-divergence compares two arms' counts; arm_race and the
cross-arm flow in cross_arm.py compare the intervals of a load and a store in different arms).

The count of an arm is a closed form over the instance of the `if`: every barrier in the arm
contributes the product of the trip counts of the loops between the `if` and the barrier, times
one indicator per nested `if` between them (1 when the barrier's arm is taken). A nested loop
bound or condition that depends on a loop inside the arm has no such closed form (the count
would be a sum over iterations): a reason is returned instead, and the query is UNKNOWN.
"""
from __future__ import annotations

import z3

from ..facts.view import KernelView
from ..hw.expr import symbols
from .smt import Encoder, Instance


class BarrierCount:
    def __init__(self, view: KernelView, enc: Encoder):
        self.view = view
        self.enc = enc

    def barriers_in(self, branch: int, arm: int) -> list[int]:
        return [b for b in self.view.barriers if (branch, arm) in self.view.in_branch.get(b, [])]

    def barriers_before(self, branch: int, arm: int, stmt: int, inst: Instance) -> tuple[z3.ArithRef, str]:
        """How many barriers of `branch`'s arm the thread of `inst` passed inside the `if` before it
        runs `stmt` (a closed form; a reason instead when a loop bound or a condition depends on a
        loop inside the `if`)."""
        total: z3.ArithRef = self.enc.int_val(0)
        outer = set(self.view.enclosing_loops(branch))
        table = self.view.kf.table
        for b in self.barriers_in(branch, arm):
            lb = [h for h in self.view.enclosing_loops(b) if h not in outer]
            lx = [h for h in self.view.enclosing_loops(stmt) if h not in outer]
            common = []
            for h1, h2 in zip(lb, lx):
                if h1 != h2:
                    break
                common.append(h1)
            anchor = common[-1] if common else branch  # per iteration of the innermost common loop
            per, why = self._times(anchor, b, inst)
            if why:
                return total, why
            before = per if b < stmt else self.enc.int_val(0)  # in this iteration, before `stmt`
            done: z3.ArithRef = self.enc.int_val(0)  # iterations of `anchor` completed before this one
            for j, h in enumerate(common):
                info = self.view.loops[h]
                inner = {f"loop:{g}" for g in common}
                for g in common[j + 1:]:
                    if inner & (symbols(table, self.view.loops[g].lo) | symbols(table, self.view.loops[g].hi)):
                        return total, (f"the trip count of the loop at line {self.view.span(g).line} depends on an "
                                       f"enclosing loop inside the `if`")
                lo = self.enc.int_term(info.lo, inst.env)
                k = (inst.env[f"loop:{h}"] - lo) / table.nodes[info.step].value
                done = done * (self._trips(h, inst) if j else 1) + k
            total = total + done * per + before
        return total, ""

    def _trips(self, header: int, inst: Instance) -> z3.ArithRef:
        info = self.view.loops[header]
        lo, hi = self.enc.int_term(info.lo, inst.env), self.enc.int_term(info.hi, inst.env)
        step = self.view.kf.table.nodes[info.step].value
        return z3.If(hi > lo, (hi - lo + step - 1) / step, 0)

    def _times(self, site: int, barrier: int, inst: Instance) -> tuple[z3.ArithRef, str]:
        """How often one execution of `site` runs `barrier` (the loops and nested ifs between them)."""
        outer = set(self.view.enclosing_loops(site))
        inner = [h for h in self.view.enclosing_loops(barrier) if h not in outer]
        inner_syms = {f"loop:{h}" for h in inner}
        table = self.view.kf.table
        times: z3.ArithRef = self.enc.int_val(1)
        for h in inner:
            info = self.view.loops[h]
            if inner_syms & (symbols(table, info.lo) | symbols(table, info.hi)):
                return times, (f"the trip count of the loop at line {self.view.span(h).line} depends on a loop inside "
                               f"the `if` at line {self.view.span(site).line}: its barriers are not counted in closed "
                               f"form")
            times = times * self._trips(h, inst)
        # the ifs between: around the barrier and inside `site` (so in the barrier's arm of it)
        nested = [(b, pol) for b, pol in self.view.in_branch.get(barrier, [])
                  if any(x == site for x, _ in self.view.in_branch.get(b, []))]
        for b, pol in nested:
            cond = self.view.branch_cond.get(b, -1)
            if cond < 0 or inner_syms & symbols(table, cond):
                what = "is on data" if cond < 0 else "depends on a loop inside the outer `if`"
                return times, (f"the condition of the `if` at line {self.view.span(b).line} {what}: whether its "
                               f"barriers run cannot be counted in closed form")
            c = self.enc.bool_term(cond, inst.env)
            times = times * z3.If(c if pol else z3.Not(c), 1, 0)
        return times, ""
