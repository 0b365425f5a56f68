"""Obligations -> Z3 queries -> verdicts with concrete counterexamples.

One query per (obligation, lhs chain, rhs chain). SAT gives a model, read back into a
Counterexample; UNSAT for every chain pair proves the obligation; `unknown` (timeout, or a
chain that could not be followed) makes it UNKNOWN, never VERIFIED.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import z3

from ..facts.view import KernelView
from ..hw.instructions import INSTRUCTIONS
from ..lang.errors import RuleError
from ..report.model import ChainPoint, Counterexample, Finding, Location, Side, Verdict
from . import budgets, parallel, proof_memo
from .access_queries import BANKS, AccessQueries
from .barrier_queries import PATH_RELATIONS, BarrierQueries, path_message
from .budgets import SMALL_MODEL_RLIMIT
from .canonical_model import (CanonicalForm, canonical_form, canonical_model, free_constants, model_of_values,
                              model_values, renamed_constants, renamed_text)
from .chains import Alt, Expander, Step, eval_map
from .deferred import has_deferred, relaxed, strict
from .derived_ids import check_derived_ids
from .drops_range import check_drops_ranks
from .families import FamilyProofs, Posed
from .hints import bounds_hint, fix_hint
from .point_model import Values, frame_values, point_model
from .query import Point, Query
from .raw_terms import _ast_id, connective, some_differ
from .slicing import SLICE_SAMPLE, Slice, Slicer, VariableSets, promising, query_slice, weaker_slices, worth_slicing
from .smt import Encoder, Instance, as_bool
from .violation_set import SetQuery, violating_set

STRUCTURAL_REASONS = {
    "lhs-untagged": "the left-hand value has no tagged source (its tag is Top): tag the tensor it comes from",
    "rhs-untagged": "the right-hand value has no tagged source (its tag is Top): tag the tensor it comes from",
    "lhs-mixed": "the left-hand value combines several tagged values, so it has no single tag (Top)",
    "rhs-mixed": "the right-hand value combines several tagged values, so it has no single tag (Top)",
    "a-untagged": "the A operand has no tagged source (Top) while B has one: tag A's source tensor",
    "b-untagged": "the B operand has no tagged source (Top) while A has one: tag B's source tensor",
    "no-tags": "neither operand carries tags, so the pairing cannot be checked: tag the source tensors",
    "stored-untagged": "the stored value has no tagged source (Top), so it cannot be the element the buffer's tag names",
    "stored-mixed": "the stored value combines several tagged values, so it has no single tag (Top)",
    "cross-arm": ("an asynchronous copy in one arm of this wave-specialized `if` and a load in the other: races of "
                  "copies across the arms are not checked yet"),
    "cross-arm-flow": ("the value may come from a store in the other arm of a wave-specialized `if`, a flow outside "
                       "the form the verifier follows (docs/language.md, Wave specialization; or tag the shared "
                       "buffer to check both arms modularly)"),
    "data-divergent": ("the statement runs under a condition on data: whether every lane of the warp/wave runs it "
                       "is not checked"),
    "partly-written": ("no store that writes every slot of the reduced register array reaches the reduction: a slot "
                       "no store wrote would hold anything, so the reduction is not checked"),
    "whole-array-write": ("a whole-array write (init=, a matrix instruction's result, ldmatrix) into a tagged register "
                          "array is not checked against the array's tag yet: tag the operands it comes from instead"),
}

TOGETHER_MIN = 4  # an obligation's queries are first tried in groups (disjunctions) when it has this many
TOGETHER_MAX = 12  # queries per group (the group's work budget: as many quick attempts)
# Relations whose queries are never grouped: each is proved in a few milliseconds alone, and a
# group's disjunction costs Z3 more than its queries one by one (pipelines/gemm_pipelined3: 6
# async_exposed groups of 12 took 412 ms, their 70 queries alone ~2 ms each), or the groups
# rarely hold (K pairing needs its kills: 8 of 24 groups proved in production attention, 0 of
# 28 in the pipelined GEMMs; 0.4-0.8 s per kernel spent on groups that failed; K distinctness:
# no group proved on any example, the tail GEMMs' each spent its whole budget, 1.2 M units,
# ~230 ms, against ~100 ms for all their K-distinctness obligations one by one).
UNGROUPED = frozenset({"async_exposed", "k_pairing", "k_distinct"})
# Once an obligation's first query that needs its kills is proved, the queries after it are tried
# KILLED_TOGETHER at a time, kills and all, as one disjunction (`_proved_with_kills`): the packed
# GEMM's tag assertion and K pairing have 22 such queries each, 4-5 ms each alone
# (packed_transpose 0.78x, gemm_pipelined 0.91x; Session 33). Not after a violation could be
# near (a group that fails stops the grouping), nor for the relations whose queries are found
# violated more often than proved (bank conflicts: warnings) or cost Z3 more together (async
# copies, see UNGROUPED).
KILLED_TOGETHER = 8
KILLED_UNGROUPED = frozenset({"async_exposed", "bank_conflicts"})
SLICES_TOGETHER = 64  # slices per group: they share more, so bigger groups pay (production attention: 12: 6.9 s, 200: 5.0 s)
SMALL_SIZES = (64, 512)  # counterexamples are re-solved with every size at most this, smallest first

# relations whose counterexample names two accesses (or two executions) instead of a tag pair
ACCESS_RELATIONS = {
    "stored_tag": "the stored value's tag equals the buffer's tag at the store coordinates",
    "write_once": "no two store instances write the same output element",
    "write_count": "the number of store instances equals the number of output elements",
    "raw_race": "a store and a later load of the same element by different threads are ordered by a barrier",
    "war_race": "a load and a later store of the same element by different threads are ordered by a barrier",
    "async_exposed": "an async copy is waited for (and published by a barrier) before its data is read",
    "k_distinct": "each K tag is accumulated into an accumulator element at most once",
    "bank_conflicts": "the lanes of one access phase touch different words of one bank",
    "broadcast": "a row statistic is combined with a value of its own row (its tag without the reduced component)",
    "stat_eq": "two row statistics combined belong to the same row",
    "reduce_uniform": "a reduction (over lanes or register slots) combines elements of one row only",
    "barrier_match": "two threads of a block that take different arms of an `if` reach as many barriers inside it",
    "barrier_trips": "two threads of a block run a loop that holds a barrier equally often",
    "lanes_converged": "every lane of the warp/wave of a thread that runs the statement runs it",
    "arm_race": "a store in one arm of an `if` and a load in the other fall in different barrier intervals",
    "outside_views": "a store through one alias does not land in another tagged subview of the same storage",
}
KNOWN_RELATIONS = {"eq", "rel", "k_pairing", "in_bounds", "mask_rel"} | set(ACCESS_RELATIONS)
# relation -> the kinds of ids it reads as (site, lhs, rhs) beyond "site is a statement" ("": not
# read; a relation not listed compares two values); docs/writing-invariants.md, the relations table
_ACCESSES = ("", "access", "access")
OPERAND_KINDS: dict[str, tuple[str, str, str]] = {
    "in_bounds": ("", "array access", ""), "stored_tag": ("", "access", ""), "write_count": ("", "access", ""),
    "bank_conflicts": ("", "access", ""), "outside_views": ("", "access", ""),
    "write_once": _ACCESSES, "raw_race": _ACCESSES, "war_race": _ACCESSES, "async_exposed": _ACCESSES,
    "arm_race": _ACCESSES, "k_distinct": ("", "value", ""), "mask_rel": ("", "value", ""),
    "barrier_match": ("", "", ""), "lanes_converged": ("", "", ""), "barrier_trips": ("loop", "", ""),
}


class KernelSolver:
    def __init__(self, view: KernelView, derived: dict[str, list[tuple]], metadata: dict[str, dict[str, str]],
                 timeout_s: float, violation_sets: bool = True, max_errors: int | None = None,
                 suppressed: Callable[[Finding], bool] = lambda f: False, context: z3.Context | None = None,
                 jobs: int = 1):
        check_derived_ids(view, derived)  # rows a --rules file added with ids the kernel lacks: exit 4
        self.violation_sets = violation_sets
        self.max_errors, self.suppressed = max_errors, suppressed
        self.jobs = jobs  # processes deciding the obligations (solver/parallel.py)
        # whether `discharge` leaves violation sets to be counted later (by any process), and the
        # queries it left, by obligation (`take_set_queries`)
        self.defer_sets = False
        self._set_queries: dict[tuple, SetQuery] = {}
        self.unchecked = 0  # obligations max_errors left undecided
        self.view = view
        self.enc = Encoder(view, context)  # the context of the kernel's derived facts, when given
        self.expander = Expander(view, self.enc, derived)
        self.access = AccessQueries(view, self.enc, self.expander, derived)
        self.barriers = BarrierQueries(view, self.enc)
        self.derived = derived
        self.metadata = metadata
        self.timeout_ms = max(1, int(timeout_s * 1000))
        self.access.guarded.timeout_ms = self.timeout_ms
        self.base = self.enc.base_constraints()
        self._base_side = self.enc.side_snapshot()
        self._variable_sets = VariableSets(self.enc.ctx)  # the slicers' of every obligation
        # what this check decided of a query, by its formulas' AST ids (`_identity`; the formulas
        # kept alive): unsat (proved), or sat for a kill-free attempt
        self._decided: dict[tuple[int, ...], tuple[list[z3.BoolRef], z3.CheckSatResult]] = {}
        # the current obligation's kill-free attempts, per query (`_relaxed`; reset per obligation)
        self._relaxed_outcomes: dict[int, tuple[Query, z3.CheckSatResult]] = {}
        # id(query) -> (it, how many bit decompositions there were right after its kills were
        # built): a query whose kills a group built before its turn (`_proved_with_kills`) is
        # asked with those, not with those that later queries' kills added since
        self._side_of: dict[int, tuple[Query, int]] = {}
        # the content keys of the slices this check proved (`_proved_slices`), memo on or off
        self._proved_slice_keys: set[bytes] = set()
        self._families: FamilyProofs | None = None  # made by `findings` from its obligations
        # obligation -> its queries as `_posed` built them for a family, with the bit
        # decompositions and names after them: `discharge` goes on from there (`_built_queries`)
        self._built: dict[tuple, tuple[list[Query], tuple, int]] = {}
        self._last_form: tuple[tuple[int, ...], list[z3.BoolRef], CanonicalForm] | None = None  # `_canonical_form`
        self._frames: dict[tuple[int, ...], tuple[tuple[z3.BoolRef, ...], Values | None]] = {}  # `_point_model`

    # ----------------------------------------------------------- findings
    def findings(self) -> list[Finding]:
        check_drops_ranks(self.view, self.enc, self.expander)  # a drops= past its operand's rank: exit 3
        out: list[Finding] = []
        uncertain = {s for _k, s in self.derived.get("uncertain_site", [])}
        for _k, site, inv, reason in self.derived.get("structural", []):
            if site in uncertain:  # the value may come from the other arm of a wave-specialized `if`
                why = f"{self._cross_arm_why(site)} (else: {STRUCTURAL_REASONS.get(reason, reason)})"
                out.append(self._finding(inv, site, Verdict.UNKNOWN, why, reason=why))
                continue
            out.append(self._finding(inv, site, Verdict.VIOLATION, STRUCTURAL_REASONS.get(reason, reason),
                                     reason=STRUCTURAL_REASONS.get(reason, reason)))
        for _k, site, inv, reason in self.derived.get("unchecked", []):
            out.append(self._finding(inv, site, Verdict.UNKNOWN, STRUCTURAL_REASONS.get(reason, reason),
                                     reason=STRUCTURAL_REASONS.get(reason, reason)))
        obligations = self.derived.get("obligation", [])
        for _k, site, inv, relation, lhs, rhs in obligations:  # a rule's bad obligation is exit 4, checked or not
            self._validate(site, inv, relation, lhs, rhs)
        # with max_errors, in report order, so that it keeps exactly the report's first errors
        # (not otherwise: the rules' order builds shared terms in an order some kernels solve
        # faster in, e.g. gemm_pipelined's K coverage 0.12 s vs 0.24 s after the pairing)
        ordered = obligations if self.max_errors is None else \
            sorted(obligations, key=lambda o: self._report_key(o[1], o[2]))
        self._families = FamilyProofs([tuple(o[1:]) for o in ordered if o[3] in KNOWN_RELATIONS],
                                      self._posed, self._proves_family, self._family_parameter, self.enc.ctx,
                                      self._variable_sets, self.enc.ranges, self._disjunction_proved)
        try:
            decided = None
            if self.max_errors is None and self.jobs > 1:  # (max_errors stops in report order: one process)
                spread = [tuple(o[1:]) for o in ordered]
                if parallel.forks_at_once(spread):
                    self._frame_before_fork(spread)
                self.defer_sets = True
                decided = parallel.discharge_all(spread, lambda o: self.discharge(*o), self.jobs,
                                                 self.take_set_queries)
                self.defer_sets = False
                self._set_queries.clear()
            if decided is None:  # one process (or an obligation raised: decided again, as -j1 meets it)
                self._discharge_all(ordered, out)
            else:
                out.extend(decided)
        finally:
            self.defer_sets = False
            self._set_queries.clear()
            self._families = None  # it holds this solver's methods: no cycle outlives the check
            self._built.clear()
        out.sort(key=_report_order)
        return out

    def _frame_before_fork(self, obligations: list[tuple]) -> None:
        """The kernel's point frame (`_point_model`), made before helpers are forked at once
        (parallel.forks_at_once) when a bank access conflicts (its enumeration, remembered for
        `discharge`, finds a witness): the frame's canonical model takes a fresh Z3 context, and
        the first one a process makes after a fork copies the context's 16 MB page by page
        (~10 ms of page faults in each process that finds a conflict). The frame reads only the
        launch, so the first lane of any bank query gives it (names restart per obligation: the
        same terms)."""
        for _site, _inv, relation, aid, _rhs in obligations:
            if relation == "bank_conflicts" and self.access.bank_witness(aid):
                self.enc.restart_names()
                first = self.enc.new_instance(self.view.accesses[aid].stmt, "p1", with_guards=False)
                self._frame_values(self.access.bank_frame(first))
                return

    def _discharge_all(self, ordered: list[tuple], out: list[Finding]) -> None:
        # max_errors' errors: the structural ones, then each decided one
        errors = [f for f in out if self._counts_as_error(f)] if self.max_errors is not None else []
        for n, (_k, site, inv, relation, lhs, rhs) in enumerate(ordered):
            if self._stop_before(errors, self._report_key(site, inv)):
                self.unchecked = len(ordered) - n
                break
            out.append(self.discharge(site, inv, relation, lhs, rhs))
            if self.max_errors is not None and self._counts_as_error(out[-1]):
                errors.append(out[-1])

    def _report_key(self, site: int, inv: str) -> tuple[int, int, str]:
        loc = Location.of(self.view.span(site))
        return (loc.line, loc.col, inv)

    def _counts_as_error(self, f: Finding) -> bool:
        """An error for `max_errors`: error severity, not VERIFIED, not suppressed."""
        return f.severity == "error" and f.verdict != Verdict.VERIFIED and not self.suppressed(f)

    def _stop_before(self, errors: list[Finding], key: tuple[int, int, str]) -> bool:
        """Whether `max_errors` lets the obligations from `key` on go undecided: the report already
        has that many `errors` that sort before them, and a violation among them fixes the
        kernel's verdict, so that what the report shows first and its verdict are those of the
        whole check."""
        if self.max_errors is None:
            return False
        return (sum(1 for f in errors if _report_order(f) <= key) >= self.max_errors
                and any(f.verdict == Verdict.VIOLATION for f in errors))

    def _cross_arm_why(self, site: int) -> str:
        """Why a structural finding at `site`, which the other arm of a wave-specialized `if` may
        feed, is UNKNOWN: the reasons cross_arm.py gives for not following the flow into the loads
        behind it (found back along the rules' chain steps), or the general sentence where those
        loads' flow is followed (the rules' structural check itself does not follow it)."""
        values = {v for v, (_kind, s) in self.view.values.items() if s == site}
        todo = [a for _k, v, a in self.derived.get("value_src", []) if v in values]
        steps: dict[int, list[int]] = {}
        for _k, la, _sa, nxt in self.derived.get("chain_step", []):
            steps.setdefault(la, []).append(nxt)
        cross = {a for _k, a in self.derived.get("cross_arm_load", [])}
        seen: set[int] = set()
        plans: list = []
        while todo:
            a = todo.pop()
            if a in seen or a not in self.view.accesses:
                continue
            seen.add(a)
            todo.extend(steps.get(a, []))
            if a in cross:
                plans.append(self.expander.arms.plan(a, bool(self.expander.reaching.get(a))))
        reasons = sorted({p for p in plans if isinstance(p, str)})
        if reasons:
            return ("the value may come from a store in the other arm of a wave-specialized `if`, a flow the "
                    f"verifier does not follow here: {'; '.join(reasons)}")
        if plans:  # followed for the tag obligations (chains.py), not by the rules' structural check
            return ("the value may come from a store in the other arm of a wave-specialized `if`, a flow this "
                    "structural check does not follow (tag the shared buffer to check both arms modularly)")
        return STRUCTURAL_REASONS["cross-arm-flow"]

    def _finding(self, inv: str, site: int, verdict: Verdict, message: str, **kw) -> Finding:
        meta = self.metadata.get(inv, {})
        span = self.view.span(site)
        loc = Location.of(span)
        return Finding(inv, meta.get("title", inv), meta.get("severity", "error"), verdict, loc, message, **kw)

    def _validate(self, site: int, inv: str, relation: str, lhs: int, rhs: int) -> None:
        """A rule's obligation whose site or operands the relation cannot read: a rule error
        (exit 4), raised before anything is solved (an unknown relation is an UNKNOWN finding)."""
        if relation not in KNOWN_RELATIONS:
            return
        if site not in self.view.stmts:
            raise RuleError(f"the rule of '{inv}' emits an obligation '{relation}' at site {site}, which is not a "
                            f"statement of kernel '{self.view.kf.name}' (bind the site with a schema relation)")
        if relation == "rel" and site not in self.view.assert_rel:
            raise _rel_off_site(inv, self.view.span(site))
        if relation == "mask_rel" and site not in self.view.assert_mask:
            raise _rel_off_site(inv, self.view.span(site), "mask_rel", "assert_mask")
        if not self._operands_exist(site, relation, lhs, rhs):  # user rules are data: their ids are checked
            raise _wrong_operands(inv, relation, lhs, rhs, self.view.span(site))

    def discharge(self, site: int, inv: str, relation: str, lhs: int, rhs: int) -> Finding:
        try:
            return self._discharge(site, inv, relation, lhs, rhs)
        finally:  # what was kept for this obligation alone
            self._side_of = {}  # `_proved_with_kills`
            self._last_form = None  # its terms freed with the obligation's (see `_canonical_form`)

    def _discharge(self, site: int, inv: str, relation: str, lhs: int, rhs: int) -> Finding:
        started = time.perf_counter()
        if relation not in KNOWN_RELATIONS:
            why = f"unknown obligation relation '{relation}' (known: {', '.join(sorted(KNOWN_RELATIONS))})"
            return self._finding(inv, site, Verdict.UNKNOWN, why, reason=why)
        self._validate(site, inv, relation, lhs, rhs)
        obligation = (site, inv, relation, lhs, rhs)
        family = self._families.proved(obligation) if self._families is not None else None
        if family is not None:  # every posed query proved with its family's (solver/families.py)
            self._built.pop(obligation, None)
            return self._finding(inv, site, Verdict.VERIFIED, "proved for every block, thread, iteration and value",
                                 queries=family, solver_ms=(time.perf_counter() - started) * 1000)
        queries = self._built_queries(obligation)  # a KeyError from here on is the checker's bug
        unknown_reasons: list[str] = []
        count = 0
        self._relaxed_outcomes = {}
        posed = [q for q in queries if not (q.unknown or q.lhs.unknown or q.rhs.unknown)]
        sliced = self._proved_sliced(posed)
        together = self._proved_together([q for q in posed if id(q) not in sliced]) if relation not in UNGROUPED else set()
        relax, group_next = True, False
        for q in queries:
            reason = q.unknown or q.lhs.unknown or q.rhs.unknown
            if reason:
                unknown_reasons.append(reason)
                continue
            count += 1
            if id(q) in together or id(q) in sliced:
                continue
            if relax:
                if self._proved_without_kills(q):
                    continue
                relax = False  # this obligation's queries need their kills: stop paying for the attempt
                group_next = relation not in KILLED_UNGROUPED and has_deferred(q.constraints)
            formulas = self.formulas(q)  # builds the deferred kills (an internal error if it fails)
            same = self._identity(formulas)
            if self._decided_as(same) == z3.unsat:
                continue
            key = self.enc.query_key(formulas)
            if proof_memo.MEMO.proved(key):
                self._decided[same] = (formulas, z3.unsat)
                continue
            model = self._known_violation(key, formulas)  # before normalising: most are hits
            if model is None and q.point is not None:  # a concrete point: its model, if it is one
                model = self._point_model(q.point, formulas, key)
            if model is not None:
                result, solver = z3.sat, None
            else:
                prepared = self.enc.prepare(formulas)
                # a query known to be satisfiable: its canonical model at once (the one the
                # quick attempt's SAT would lead to), else the quick attempt as for any other
                model = self._canonical_model(prepared, formulas, key) if q.certain else None
                result, solver = (z3.sat, None) if model is not None else \
                    self.enc.quick_check(prepared, self.timeout_ms)
            if q.hint and result != z3.sat:
                continue  # a stronger query, asked for its counterexample: the next one decides
            if result == z3.unknown:  # the budgeted attempts did not decide: the full solver
                result, solver, model = self._full_check(prepared, formulas, key)
            if result == z3.unsat:
                proof_memo.MEMO.remember(key)
                self._decided[same] = (formulas, z3.unsat)
                if group_next:  # the first query with kills holds: the rest in groups
                    group_next = False
                    together = together | self._proved_with_kills(  # the posed queries after this one
                        [r for r in posed[count:] if id(r) not in together and id(r) not in sliced])
            if result == z3.sat:
                model = model or self._small_model(solver, prepared, formulas, key)
                cex = self._counterexample(model, q, relation)
                cex.index_tables = self._index_tables(_Evaluator(model))
                ms = (time.perf_counter() - started) * 1000
                finding = self._finding(inv, site, Verdict.VIOLATION, self._message(relation, cex, site),
                                        counterexample=cex, queries=count, solver_ms=ms)
                if self.violation_sets and finding.severity == "error" and relation not in ("write_count",):
                    counted = self._set_query(q, relation)
                    if self.defer_sets:
                        self._set_queries[obligation] = counted
                    else:
                        finding.violation_set = violating_set(counted)
                finding.fix_hint = self._fix_hint(relation, q, cex)
                return finding
            if result == z3.unknown:
                unknown_reasons.append(f"solver returned unknown ({solver.reason_unknown()})")
        ms = (time.perf_counter() - started) * 1000
        if unknown_reasons:
            why = "; ".join(sorted(set(unknown_reasons)))
            return self._finding(inv, site, Verdict.UNKNOWN, f"could not be proved or refuted: {why}", reason=why,
                                 queries=count, solver_ms=ms)
        return self._finding(inv, site, Verdict.VERIFIED, "proved for every block, thread, iteration and value",
                             queries=count, solver_ms=ms)

    def _built_queries(self, obligation: tuple) -> list[Query]:
        """The obligation's queries, built from its first fresh name with the kernel's bit
        decompositions only (bit decompositions are per obligation: carrying every earlier one
        into later queries, hundreds with swizzled layouts and kill instantiations, slows each
        query down); or those a family attempt built so (`_posed`), with the encoder as it was
        right after building them: the same terms, names and bit decompositions."""
        built = self._built.pop(obligation, None)
        if built is not None:
            queries, side, used = built
            self.enc.restore_side(side)
            self.enc.resume_names(used)
            return queries
        site, _inv, relation, lhs, rhs = obligation
        self.enc.restore_side(self._base_side)
        self.enc.restart_names()
        return self._queries(site, relation, lhs, rhs)

    def _posed(self, obligation: tuple) -> Posed | None:
        """An obligation's posed queries for its family (solver/families.py), built as
        `discharge` builds them (names restarted, the kernel's bit decompositions only; the
        kills, when asked for, with the names and bit decompositions they get when built right
        after the queries), and kept for `discharge`; None when one is UNKNOWN before solving
        (a chain not followed)."""
        queries = self._built_queries(obligation)
        side, used = self.enc.side_snapshot(), self.enc.names_used()
        self._built[obligation] = (queries, side, used)
        if any(q.unknown or q.lhs.unknown or q.rhs.unknown for q in queries):
            return None

        names = [used]  # the fresh names taken so far: each batch of kills goes on after the last

        def with_kills(which: list[int]) -> dict[int, list[z3.BoolRef]]:
            kept = self._built.pop(obligation, None) is not None
            self.enc.restore_side(side)
            self.enc.resume_names(names[0])
            out = {i: self.formulas(queries[i]) for i in which}
            names[0] = self.enc.names_used()
            if kept and len(self.enc.side) == len(side[0]):
                # no bit decompositions came with the kills (now or before): discharge goes on
                # from these queries, its own kills named after these (with new bit decompositions
                # it builds them all again, so that each formula carries the ones it would alone)
                self._built[obligation] = (queries, side, names[0])
            return out

        return Posed([self.relaxed_formulas(q) for q in queries], [has_deferred(q.constraints) for q in queries],
                     with_kills, len(side[0]) != len(self._base_side[0]))

    def _proves_family(self, formulas: list[z3.BoolRef], members: int) -> bool:
        """Whether a family's query (solver/families.py) is UNSAT within one budgeted attempt,
        a quick attempt's budget per member."""
        return proof_memo.proved_by(self.enc.query_key(formulas), lambda: self.enc.proves(
            self.enc.prepare(formulas), self.timeout_ms, budgets.QUICK_PROOF_SEEDS[:1],
            budgets.QUICK_PROOF_RLIMIT * members))

    def _disjunction_proved(self, cases: list[list[z3.BoolRef]]) -> bool:
        """Whether the disjunction of several obligations' kill-free queries (families.py,
        DISJUNCTIVE) is UNSAT within a quick attempt's budget per case; with the kernel's bit
        decompositions only (the cases carry nothing else: `Posed.own_side`)."""
        self.enc.restore_side(self._base_side)
        return self._cases_proved(cases)

    def _family_parameter(self, index: int, values: tuple[int, ...]) -> z3.ArithRef:
        return self.enc.ranged_var(f"family!{index}", min(values), max(values))

    def relaxed_formulas(self, q: Query) -> list[z3.BoolRef]:
        """`formulas` without the deferred kills (a weaker query: its UNSAT is the query's)."""
        return [*self.base, *relaxed(q.constraints), q.violated, *self.enc.side]

    def formulas(self, q: Query) -> list[z3.BoolRef]:
        """Everything a query asserts: the kernel's base, its constraints (the deferred ones
        built first: building them may add bit decompositions to enc.side), the negated property."""
        constraints = strict(q.constraints)
        built = self._side_of.get(id(q))
        side = self.enc.side if built is None or built[0] is not q else self.enc.side[:built[1]]
        return [*self.base, *constraints, q.violated, *side]

    def _proved_sliced(self, posed: list[Query]) -> set[int]:
        """The posed queries of an obligation proved by their slices (ids of the Query objects;
        solver/slicing.py): a weaker query of the constraints the property depends on, so its
        UNSAT is the query's. Slices equal up to variable names (their content key) are proved
        once, in groups as `_proved_together` does, then one by one, each attempt budgeted; the
        queries not proved here are asked as before, so a violation's counterexample is the one
        it would be without this attempt. Only where slicing pays (`worth_slicing`): a slice
        barely smaller than its query costs as much to prove."""
        if len(posed) < TOGETHER_MIN:
            return set()
        slicer = Slicer(self.enc.ctx, self._variable_sets)
        made: list[tuple[Query, Slice]] = []
        for q in posed:
            sliced = query_slice(slicer, q)
            if sliced is not None:
                made.append((q, sliced))
                if len(made) == SLICE_SAMPLE and len(posed) > SLICE_SAMPLE and not promising(made):
                    return set()
        distinct = {sliced.identity: sliced for _q, sliced in made}  # equal parts' slices, equal identity
        if not worth_slicing(len(posed), len(distinct), sum(s.kept for _q, s in made), sum(s.whole for _q, s in made)):
            return set()  # decided before any digest: most obligations end here
        # the keys of [*base, *slice, *side], fed piece by piece: slices share their first pieces
        prefixes: dict = {}
        keys = {identity: self.enc.content_key_of_chunks(
                    [self.base, *sliced.pieces, [sliced.violated, *self.enc.side]], prefixes)
                for identity, sliced in distinct.items()}
        by_key = {key: distinct[identity] for identity, key in keys.items() if key is not None}
        proved_keys = self._proved_slices(by_key)
        return {id(q) for q, sliced in made if keys[sliced.identity] in proved_keys}

    def _proved_slices(self, slices: dict[bytes, Slice]) -> set[bytes]:
        """The keys of the slices proved: those this check proved before (an earlier obligation's
        slice with the same content key: the proof memo's reuse, memo on or off), then those with
        no weaker slice (`weaker_slices`), each slice a proved weaker one implies, then the rest;
        each round as `_proved_in_groups` does. Why: production attention's obligations pose
        again 648 of their broadcasts' 864 slices (o0..o3 differ only in the V operand, which
        the slices leave out) and 54 of K distinctness's 72."""
        known = self._proved_slice_keys.intersection(slices)
        slices = {k: s for k, s in slices.items() if k not in known}
        weaker = weaker_slices({k: (*s.pieces, [s.violated]) for k, s in slices.items()}, self.enc.ctx)
        proved = self._proved_in_groups({k: s.formulas for k, s in slices.items() if not weaker[k]})
        proved.update(k for k, subsets in weaker.items() if any(w in proved for w in subsets))
        proved.update(self._proved_in_groups({k: s.formulas for k, s in slices.items()
                                              if k not in proved and weaker[k]}))
        self._proved_slice_keys.update(proved)
        return proved | known

    def _proved_in_groups(self, slices: dict[bytes, list[z3.BoolRef]]) -> set[bytes]:
        """The keys of the slices proved: a group of up to SLICES_TOGETHER at once (their
        disjunction UNSAT), the slices of a group not proved one by one."""
        proved: set[bytes] = set()
        keys = list(slices)
        for start in range(0, len(keys), SLICES_TOGETHER):
            group = keys[start:start + SLICES_TOGETHER]
            if len(group) > 1 and self._cases_proved([slices[k] for k in group]):
                proved.update(group)
                continue
            for key in group:
                formulas = [*self.base, *slices[key], *self.enc.side]
                memo_key = key if self.enc.use_proof_memo else None
                if proof_memo.proved_by(memo_key, lambda: self.enc.proves(
                        self.enc.prepare(formulas), self.timeout_ms, budgets.QUICK_PROOF_SEEDS[:1])):
                    proved.add(key)
        return proved

    def _proved_together(self, posed: list[Query]) -> set[int]:
        """The posed queries of an obligation proved in groups (ids of the Query objects): a
        group of consecutive queries is proved at once when the disjunction of their kill-free
        formulas (the constraints all of them share asserted once) is UNSAT within one budgeted
        attempt. Why: a statistic broadcast over a loop-carried softmax pairs every alternative
        of one chain with every one of the other (648 queries per obligation in production
        attention), and posing each (normalising, digesting, asserting its hundreds of
        formulas) costs more than Z3 needs to refute a group. A weaker formula per query
        again, so its UNSAT is each query's; the queries of a group not proved are tried one
        by one, so a violation's counterexample is the one it would be without this attempt."""
        if len(posed) < TOGETHER_MIN:
            return set()
        proved: set[int] = set()
        for start in range(0, len(posed), TOGETHER_MAX):
            group = posed[start:start + TOGETHER_MAX]
            if start == 0 and self._first_needs_kills(group):
                continue
            if len(group) > 1 and self._group_proved(group):
                proved.update(id(q) for q in group)
        return proved

    def _proved_with_kills(self, posed: list[Query]) -> set[int]:
        """The queries proved in groups of KILLED_TOGETHER (ids of the Query objects): each
        group's disjunction, kills built, UNSAT within a quick attempt's budget per query; the
        first group not proved ends the attempt, and its queries are asked one by one with the
        bit decompositions they had when their own kills were built (`formulas`), so that a
        violation's counterexample is the one it gets without this attempt."""
        proved: set[int] = set()
        for start in range(0, len(posed), KILLED_TOGETHER):
            group = posed[start:start + KILLED_TOGETHER]
            if len(group) < 2:
                break
            cases, side_of = [], {}
            for q in group:
                cases.append([*strict(q.constraints), q.violated])
                side_of[id(q)] = (q, len(self.enc.side))
            if not self._cases_proved(cases):
                self._side_of.update(side_of)
                break
            proved.update(id(q) for q in group)
        return proved

    def _first_needs_kills(self, group: list[Query]) -> bool:
        """Whether the first query's kill-free formula is satisfiable (its quick attempt, which
        the query would get anyway, found a model): the group's disjunction holds that formula,
        so no attempt can prove the group. Why: the queries of a pipelined operand's chains need
        their kills, and attempting such groups took 2.6 s of speed/gemm_mma_pipelined's 6.7 s."""
        return self._relaxed(group[0]) == z3.sat

    def _group_proved(self, group: list[Query]) -> bool:
        return self._cases_proved([[*relaxed(q.constraints), q.violated] for q in group])

    def _cases_proved(self, cases: list[list[z3.BoolRef]]) -> bool:
        """Whether the disjunction of the conjunctions `cases` (what all of them share asserted
        once) is UNSAT with the kernel's base, within one budgeted attempt per case."""
        ctx = self.enc.ctx
        cref = ctx.ref()
        parts = [{_ast_id(cref, f.as_ast()): f for f in case} for case in cases]
        common = set(parts[0]).intersection(*parts[1:])
        shared = [f for i, f in parts[0].items() if i in common]
        disjuncts = [connective("and", [f for i, f in p.items() if i not in common], ctx) for p in parts]
        formulas = [*self.base, *shared, connective("or", disjuncts, ctx), *self.enc.side]
        rlimit = budgets.QUICK_PROOF_RLIMIT * len(cases)
        return proof_memo.proved_by(self.enc.query_key(formulas), lambda: self.enc.proves(
            self.enc.prepare(formulas), self.timeout_ms, budgets.QUICK_PROOF_SEEDS[:1], rlimit))

    def _proved_without_kills(self, q: Query) -> bool:
        """Most tag proofs hold whichever earlier store a load reads: the query without its
        deferred "not overwritten in between" constraints (solver/deferred.py; a weaker formula,
        so its UNSAT is the query's UNSAT) is tried first, within the quick deterministic budget
        only, and one seed of it. A SAT or a spent budget falls through to the full query, so verdicts and
        counterexamples are the full query's."""
        return self._relaxed(q) == z3.unsat

    def _relaxed(self, q: Query) -> z3.CheckSatResult | None:
        """The outcome of the quick attempt on `q` without its deferred kills (unsat: proved; sat;
        unknown: budget spent), decided once per query of the obligation; None when it has none."""
        if not has_deferred(q.constraints):
            return None
        known = self._relaxed_outcomes.get(id(q))
        if known is not None:
            return known[1]
        formulas = self.relaxed_formulas(q)
        same = self._identity(formulas)
        outcome = self._decided_as(same)
        if outcome is None:
            key = self.enc.query_key(formulas)
            if proof_memo.MEMO.proved(key):
                outcome = z3.unsat
            else:
                prepared = self.enc.prepare(formulas)
                outcome = self.enc.quick_check(prepared, self.timeout_ms, budgets.QUICK_PROOF_SEEDS[:1])[0]
                if outcome == z3.unsat:
                    proof_memo.MEMO.remember(key)
            if outcome != z3.unknown:
                self._decided[same] = (formulas, outcome)
        self._relaxed_outcomes[id(q)] = (q, outcome)  # the query kept alive: its id stays its own
        return outcome

    def _decided_as(self, same: tuple[int, ...]) -> z3.CheckSatResult | None:
        """What this check decided of the query with identity `same`, if anything."""
        known = self._decided.get(same)
        return None if known is None else known[1]

    def _identity(self, formulas: list[z3.BoolRef]) -> tuple[int, ...]:
        """The AST ids of a query's formulas: what `_decided` knows a query by. Why: obligations
        restart their instances' names (Encoder.restart_names), so two obligations that pose the
        same query build the same terms, and the check decides it
        once (speed/gemm_mma_pipelined's 16 K-distinctness obligations pose 40 distinct queries
        160 times: four accumulators per A operand). Ids, not a content digest: cheaper than the
        proof memo's key, and whether the memo is on or not."""
        cref = self.enc.ctx.ref()
        return tuple(_ast_id(cref, f.as_ast()) for f in formulas)

    def _fix_hint(self, relation: str, q: Query, cex: Counterexample) -> dict | None:
        """Where the missing barrier / wait / mask goes (solver/hints.py)."""
        if relation in ("raw_race", "war_race", "async_exposed"):
            load, other = q.lhs.chain[0].stmt, q.rhs.chain[0].stmt
            if relation == "war_race":  # the load must be ordered before the later store
                first, second = load, other
            else:  # the store (copy) must be ordered before the load
                first, second = other, load
            if relation == "async_exposed":
                waited = cex.instruction.get("waited") != 0
                what = ("syncthreads() after the async_wait()" if waited else
                        "async_wait() (then syncthreads() if another thread copied)")
            else:
                what = "syncthreads()"
            # carried: the two instances run in different iterations of a loop around both
            a_iters, b_iters = cex.lhs.chain[0].iterations, cex.rhs.chain[0].iterations
            carried = first > second or any(a_iters[n] != b_iters[n] for n in set(a_iters) & set(b_iters))
            return fix_hint(self.view, first, second, carried=carried, what=what)
        if relation == "in_bounds":
            step = q.lhs.chain[0]
            acc = self.view.accesses[step.access]
            source = self.view.kf.source
            line = source.line_text(self.view.span(acc.stmt).line) if source is not None else ""
            return bounds_hint(self.view, acc.stmt, acc.buffer, cex.lhs.coordinates, cex.rhs.coordinates, line,
                               acc.kind == "load")
        return None

    def _index_tables(self, ev: "_Evaluator") -> dict[str, list[list[int]]]:
        """The routing-table entries the counterexample relies on: [coordinates..., value] per
        index-tensor read of the query (the replay runs the simulator on tables holding them)."""
        out: dict[str, set[tuple[int, ...]]] = {}
        for name, args, app in self.enc.index_reads:
            out.setdefault(name, set()).add((*(ev(a) for a in args), ev(app)))
        return {name: [list(e) for e in sorted(entries)] for name, entries in sorted(out.items())}

    def _full_check(self, prepared: list[z3.BoolRef], formulas: list[z3.BoolRef], key: bytes | None
                    ) -> tuple[z3.CheckSatResult, z3.Solver | None, z3.ModelRef | None]:
        """The full solver's verdict on a prepared query the budgeted attempts left open, asked of
        its canonical text in a fresh context (canonical_model.py): with its solver (for the
        reason of an unknown) or, when satisfiable, its canonical model. Why: the time of these
        longest solves depended on which terms the kernel's context had made before (a swizzled
        GEMM mutant's K-coverage proof: 0.7 s or 1.4 s as unrelated code kept a few terms
        alive longer), so a query near the timeout could be proved in one history and not in
        another (the proof memo skips earlier queries); from its text it takes what it takes.
        Over the mutation benchmark's 53 such queries: 5.9 s in the kernel's context, 6.0 s so
        (reading the text back is the difference). A text Z3 cannot read back, or a satisfiable
        query without a canonical model, is solved in the kernel's context as before."""
        _constants, text = self._canonical_form(prepared)
        ctx = z3.Context()
        fresh = z3.Tactic("default", ctx).solver()  # as the attempts' solvers (Encoder.attempt_solver)
        for name, value in (("timeout", self.timeout_ms), ("random_seed", 0), ("arith.enable_hnf", True)):
            fresh.set(name, value)
        try:
            fresh.from_string(text)
        except z3.Z3Exception:
            fresh = None
        if fresh is not None:
            result = fresh.check()
            model = self._canonical_model(prepared, formulas, key) if result == z3.sat else None
            if result != z3.sat or model is not None:
                return result, fresh, model
        solver = self.enc.solver_holding(prepared, self.timeout_ms)
        result = solver.check()  # the canonical copy gave no model (or none can be read): `_small_model`'s fallback
        return result, solver, self._smallest(solver, list(self.enc.sizes.values())) if result == z3.sat else None

    def _small_model(self, solver: z3.Solver, prepared: list[z3.BoolRef], formulas: list[z3.BoolRef],
                     key: bytes | None) -> z3.ModelRef:
        """The counterexample's model of the `prepared` query `solver` holds, a function of the
        query alone (solver/canonical_model.py: neither the proof memo, nor earlier queries, nor
        variable names change it), remembered for the next query with this key as the values of
        the free constants of its `formulas` (before normalisation: a hit then needs none); the
        solver's own model if the canonical copy is not settled within the timeout (never
        remembered: it depends on the solver's history; a budgeted attempt's is a tactic
        solver without HNF cuts, Encoder.attempt_solver, whose bounded re-solves each run the
        whole tactic)."""
        model = self._canonical_model(prepared, formulas, key)
        return model if model is not None else self._smallest(solver, list(self.enc.sizes.values()))  # decided

    def _canonical_model(self, prepared: list[z3.BoolRef], formulas: list[z3.BoolRef],
                         key: bytes | None) -> z3.ModelRef | None:
        """`_small_model`'s canonical model, remembered; None when the copy has none within the
        timeout (or is UNSAT: a query taken to be satisfiable, `Query.certain`, then goes the
        usual way)."""
        model = canonical_model(prepared, self._canonical_form(prepared), list(self.enc.sizes.values()),
                                self.timeout_ms, self._smallest, self.enc.ctx)
        self._remember_violation(model, formulas, key)
        return model

    def _point_model(self, point: Point, formulas: list[z3.BoolRef], key: bytes | None) -> z3.ModelRef | None:
        """The query's model at its concrete point (solver/point_model.py), remembered as a
        canonical one is; None when the point does not satisfy it. Each frame's canonical model
        is made once (a kernel's conflicts share the first frame, those of a loop nest the second)."""
        decompositions = self.enc.decompositions()
        for frame, starts in ((point.frame, point.starts), (point.nest, ())):
            values = self._frame_values(frame)
            model = None if values is None else point_model(formulas, point, values, starts, decompositions,
                                                            self.enc.ctx)
            if model is not None:
                self.enc.index_reads = []  # it reads no index tensor (point_model): no table to report
                self._remember_violation(model, formulas, key)
                return model
        return None

    def _frame_values(self, frame: tuple[z3.BoolRef, ...]) -> Values | None:
        """The frame's canonical values (point_model.frame_values), made once per check."""
        identity = tuple(f.get_id() for f in frame)
        made = self._frames.get(identity)
        if made is None:  # the frame kept alive with its values: its AST ids stay its own
            made = self._frames[identity] = (frame, frame_values(
                frame, list(self.enc.sizes.values()), self.timeout_ms, self._smallest, self.enc.ctx))
        return made[1]

    def _remember_violation(self, model: z3.ModelRef | None, formulas: list[z3.BoolRef], key: bytes | None) -> None:
        """A query's canonical (or point) model, for the next query with this key (proof_memo)."""
        if model is not None and key is not None:
            constants = free_constants(formulas)
            values = model_values(model, constants)
            if values is not None:
                proof_memo.MEMO.remember_violation(key, self._size_positions(constants), values)

    def _known_violation(self, key: bytes | None, formulas: list[z3.BoolRef]) -> z3.ModelRef | None:
        """The canonical model an earlier query with this key was given (an agent's candidates
        and an audit's variants repeat their violations), checked against this query's formulas
        and its index-tensor reads' facts (what normalising would add: a normalised query is
        equivalent under the ranges it asserts, so the model is the one the normalised query
        would be given). The constants are walked only on a hit: most queries here are proved."""
        known = proof_memo.MEMO.violation(key)
        if known is None:
            return None
        sizes, values = known
        constants = free_constants(formulas)
        if self._size_positions(constants) != sizes:
            return None
        return model_of_values([*formulas, *self.enc.index_facts(formulas)], constants, values, self.enc.ctx)

    def _size_positions(self, constants: list[z3.ExprRef]) -> tuple[int, ...]:
        sizes = {v.get_id() for v in self.enc.sizes.values()}
        return tuple(i for i, c in enumerate(constants) if c.get_id() in sizes)

    def _smallest(self, solver: z3.Solver, sizes: list[z3.ArithRef], decided: bool = True,
                  reread: str | None = None) -> z3.ModelRef | None:
        """Prefer a counterexample at sizes that are quick to read and to replay: every size <= 64
        when possible, else <= 512, else any model. Each bounded re-solve has a deterministic
        budget (SMALL_MODEL_RLIMIT), so which model is printed does not depend on machine load;
        the --timeout stays the outer bound. `decided`: the solver's last check was SAT (its
        model is the fallback); otherwise the bounded solves come first and the unbounded one
        only when they find nothing (one solve, not two, for most violations), in a solver of its
        own: after push/pop Z3 solves incrementally, without the preprocessing that a first check
        gets, and that unbounded re-solve took 4-6x longer (1.8 s per swizzled GEMM violation).
        `reread`: the query's text (canonical_model.py), given for queries with bit-vector terms:
        each bounded solve then reads it into a solver of its own, a first check too (the
        swizzled GEMM's bank conflict: 45 ms after a push, 10 ms so; on queries without
        bit-vectors the preprocessing cost more than it saved: 0.9 -> 1.0 s over the examples'
        111 counterexamples). None: no model."""
        model = solver.model() if decided else None
        solver.set("rlimit", SMALL_MODEL_RLIMIT)
        for bound in SMALL_SIZES if sizes else ():
            if reread is not None:
                once = self._first_check_of(reread, solver.ctx, SMALL_MODEL_RLIMIT)
                once.add(*[v <= bound for v in sizes])
                if once.check() == z3.sat:
                    return once.model()
                continue
            solver.push()
            solver.add(*[v <= bound for v in sizes])
            found = solver.check() == z3.sat
            if found:
                model = solver.model()
            solver.pop()
            if found:
                return model
        if model is None:
            once = self._first_check_of(solver.sexpr(), solver.ctx)
            model = once.model() if once.check() == z3.sat else None
        return model

    def _first_check_of(self, text: str, ctx: z3.Context, rlimit: int = 0) -> z3.Solver:
        """A solver of its own holding the SMT-LIB `text`, so that its next check is a first
        one (with Z3's preprocessing), under the timeout and, if given, a work budget."""
        once = z3.Solver(ctx=ctx)
        once.set("timeout", self.timeout_ms)
        if rlimit:
            once.set("rlimit", rlimit)
        once.from_string(text)
        return once

    # ------------------------------------------------------------ queries
    def _operands_exist(self, site: int, relation: str, lhs: int, rhs: int) -> bool:
        """Whether an obligation's ids are of the kinds its relation reads (OPERAND_KINDS): the only
        look-ups that depend on the rules. Checked before any formula is built, so a failing look-up
        while building is the encoder's bug (an internal error), never blamed on the user's rules."""
        v = self.view
        kinds = {"value": lambda i: i in v.values, "access": lambda i: i in v.accesses, "loop": lambda i: i in v.loops,
                 "array access": lambda i: i in v.accesses and v.accesses[i].buffer in v.dims}
        site_kind, lhs_kind, rhs_kind = OPERAND_KINDS.get(relation, ("", "value", "value"))
        return all(kinds[kind](i) for kind, i in ((site_kind, site), (lhs_kind, lhs), (rhs_kind, rhs)) if kind)

    def _queries(self, site: int, relation: str, lhs: int, rhs: int) -> list[Query]:
        if relation == "k_pairing":
            return self._k_pairing(site, lhs, rhs)
        if relation == "in_bounds":
            return self._in_bounds(site, lhs)
        if relation == "mask_rel":
            return self._mask_rel(site, lhs)
        builders = {
            "stored_tag": lambda: self.access.stored_tag(site, lhs),
            "write_once": lambda: self.access.write_once(lhs, rhs),
            "write_count": lambda: self.access.write_count(site, lhs),
            "raw_race": lambda: self.access.raw_race(lhs, rhs),
            "war_race": lambda: self.access.war_race(lhs, rhs),
            "async_exposed": lambda: self.access.async_exposed(lhs, rhs),
            "k_distinct": lambda: self.access.k_distinct(site, lhs),
            "bank_conflicts": lambda: self.access.bank_conflicts(lhs),
            "broadcast": lambda: self.access.broadcast(site, lhs, rhs),
            "stat_eq": lambda: self.access.broadcast(site, lhs, rhs, same_length=True),
            "reduce_uniform": lambda: self.access.reduce_uniform(site, lhs, rhs),
            "barrier_match": lambda: self.barriers.barrier_match(site),
            "barrier_trips": lambda: self.barriers.barrier_trips(site),
            "lanes_converged": lambda: self.barriers.lanes_converged(site),
            "arm_race": lambda: self.barriers.arm_race(lhs, rhs, self.access),
            "outside_views": lambda: self.access.outside_views(site, lhs),
        }
        if relation in builders:
            return builders[relation]()
        inst = self.enc.new_instance(site, "u")
        rel_eid = self.view.assert_rel.get(site)
        out = []
        for left in self.expander.value(lhs, inst):
            for right in self.expander.value(rhs, inst):
                violated = self._negated_relation(relation, left.tag, right.tag, rel_eid, inst)
                out.append(Query.joined((inst.constraints, left.constraints, right.constraints), violated, left,
                                        right, inst, inst, inst, {}))
        return out

    def _negated_relation(self, relation: str, lt, rt, rel_eid: int | None, inst: Instance) -> z3.BoolRef:
        if lt is None or rt is None:
            return self.enc.bool_val(True)  # an untagged (Top) value reaches the use on this path
        if relation == "eq":
            if len(lt) != len(rt):
                return self.enc.bool_val(True)
            return some_differ(lt, rt) if lt else self.enc.bool_val(False)
        if rel_eid is None:  # discharge() refuses such an obligation first
            raise _rel_off_site("?", self.view.span(inst.stmt))
        env = dict(inst.env)
        for prefix, tag in (("lhs", lt), ("rhs", rt)):
            for i, t in enumerate(tag):
                env[f"{prefix}:{i}"] = t
                env[f"{prefix}:{i - len(tag)}"] = t
        try:
            return z3.Not(as_bool(self.enc.term(rel_eid, env)))
        except KeyError:
            return self.enc.bool_val(True)  # the relation names a component the tag does not have

    def _mask_rel(self, site: int, vid: int) -> list[Query]:
        """assert_mask: on every tagged path, the element is kept (the path passed the tagged branch
        of each select on it: those selects' conditions hold) exactly when the predicate holds. A
        model is an element that leaks through the mask, or one the mask wrongly removes."""
        inst = self.enc.new_instance(site, "u")
        out = []
        for alt in self.expander.value(vid, inst):
            if alt.tag is None:  # an untagged (masked) constant or a zero: nothing to check
                continue
            env = dict(inst.env)
            for i, t in enumerate(alt.tag):
                env[f"lhs:{i}"] = t
                env[f"lhs:{i - len(alt.tag)}"] = t
            try:
                pred = as_bool(self.enc.term(self.view.assert_mask[site], env))
            except KeyError:  # the predicate names a component the tag does not have
                out.append(Query(inst.constraints + alt.constraints, self.enc.bool_val(True), alt, alt, inst, inst,
                                 inst, {"kept": self.enc.bool_val(True)}))
                continue
            kept = z3.And(*alt.flow) if alt.flow else self.enc.bool_val(True)
            out.append(Query(inst.constraints + alt.constraints, kept != pred, alt, alt, inst, inst, inst,
                             {"kept": kept}))
        return out

    def _in_bounds(self, site: int, aid: int) -> list[Query]:
        acc = self.view.accesses[aid]
        inst = self.enc.new_instance(site, "u")
        coords = [self.enc.int_term(c, inst.env) for c in acc.coords]
        extents = [self.enc.int_term(e, inst.env) for e in self.view.dims[acc.buffer]]
        outside = z3.Or(*[z3.Or(c < 0, c >= e) for c, e in zip(coords, extents)])
        step = Step("load" if acc.kind == "load" else "store", aid, acc.stmt, acc.buffer, inst)
        index = Alt([], "", coords, [], [step])
        shape = Alt([], "", extents, [], [])
        return [Query(inst.constraints, outside, index, shape, inst, inst, inst, {})]

    def _k_pairing(self, site: int, va: int, vb: int) -> list[Query]:
        instr = INSTRUCTIONS[self.view.mma[site][0]]
        base = self.enc.new_instance(site, "u")
        a_inst, la, sa = self.expander.operand_instance(base, site, instr, "a")
        b_inst, lb, sb = self.expander.operand_instance(base, site, instr, "b")
        k_a, k_b = eval_map(instr.a.col, la, sa), eval_map(instr.b.row, lb, sb)
        pairing = [k_a == k_b]
        extras = {"k": k_a, "row": eval_map(instr.a.row, la, sa), "col": eval_map(instr.b.col, lb, sb),
                  "lane_a": la, "lane_b": lb, "slot_a": sa, "slot_b": sb}
        lefts, rights = self.expander.value(va, a_inst), self.expander.value(vb, b_inst)
        cons = base.constraints + a_inst.constraints + b_inst.constraints + pairing  # after expanding: it may add
        out = []
        for left in lefts:
            for right in rights:
                if left.zero or right.zero:  # a zero operand: the product adds nothing, nothing to pair
                    continue
                if left.tag is None or right.tag is None:
                    violated = self.enc.bool_val(True)
                else:
                    ka = left.tag[-1]
                    kb = right.tag[-2] if len(right.tag) >= 2 else right.tag[0]
                    violated = ka != kb
                out.append(Query.joined((cons, left.constraints, right.constraints), violated, left, right, base,
                                        a_inst, b_inst, extras))
        return out

    def _set_query(self, q: Query, relation: str) -> SetQuery:
        """The violated query and the variables to count its violating points over: (lane, value)
        of a matrix instruction's A operand, or the thread (and slot), on one path."""
        if relation == "k_pairing":
            instr = INSTRUCTIONS[self.view.mma[q.site.stmt][0]]
            variables = [("lane", q.extras["lane_a"], instr.group_size), ("value", q.extras["slot_a"], instr.a.values)]
        else:
            variables = [("thread", self.enc.linear_thread(q.site), self.enc.block_size())]
            reads = [s for s in q.lhs.chain[:1] + q.rhs.chain[:1]
                     if s.access >= 0 and self.view.accesses[s.access].kind == "read_all"]
            if reads and relation != "in_bounds":
                size = self.enc.nodes[self.view.buffers[reads[0].buffer][1]].value
                variables.append(("value", q.site.env["slot"], size))
        constants, text = self._canonical_form(self.enc.prepare(self.formulas(q)))
        renamed = renamed_constants(constants)
        return SetQuery(text, tuple((name, renamed_text(term, constants, renamed), size)
                                    for name, term, size in variables), self.timeout_ms)

    def _canonical_form(self, prepared: list[z3.BoolRef]) -> CanonicalForm:
        """The prepared query's canonical form, the last one made again only for other formulas
        (by AST ids, the formulas kept alive with it until the obligation is decided): a
        violation's full solve, counterexample and set query ask for the same one in turn
        (prepared again, the normaliser's memo gives the same terms)."""
        identity = tuple(f.get_id() for f in prepared)
        last = self._last_form
        if last is None or last[0] != identity:
            last = self._last_form = (identity, prepared, canonical_form(prepared, self.enc.ctx))
        return last[2]

    def take_set_queries(self) -> dict[tuple, SetQuery]:
        """The set queries `discharge` left for later (`defer_sets`), by obligation, forgotten here."""
        taken, self._set_queries = self._set_queries, {}
        return taken

    # ----------------------------------------------------- counterexample
    def _counterexample(self, model: z3.ModelRef, q: Query, relation: str) -> Counterexample:
        ev = _Evaluator(model)
        site = q.site
        dims = self.enc.block_dims()
        thread = [ev(site.env[f"tid:{d}"]) for d in range(len(dims))]
        linear = ev(self.enc.linear_thread(site))
        g = self.view.group_size
        sizes = {name.split(":", 1)[1]: ev(var) for name, var in sorted(self.enc.sizes.items())}
        if relation in ACCESS_RELATIONS:
            return self._access_counterexample(ev, q, relation, sizes)
        if relation == "k_pairing":
            lhs = self._side("A operand", q.lhs, q.lhs_inst, ev, ev(q.extras["lane_a"]), ev(q.extras["slot_a"]))
            rhs = self._side("B operand", q.rhs, q.rhs_inst, ev, ev(q.extras["lane_b"]), ev(q.extras["slot_b"]))
            lane, slot = lhs.lane, lhs.value_index
            linear = ev(self.enc.linear_thread(q.lhs_inst))
            thread = [ev(q.lhs_inst.env[f"tid:{d}"]) for d in range(len(dims))]
            instr = {k: ev(q.extras[k]) for k in ("k", "row", "col")}
            rel = "K tag of A (last component) == K tag of B (component before last)"
        elif relation == "in_bounds":
            acc = self.view.accesses[q.lhs.chain[0].access]
            lhs = self._side(f"index into {acc.buffer}", q.lhs, site, ev, None, None)
            lhs.kind = "index"
            rhs = Side(f"shape of {acc.buffer}", None, None, [ev(c) for c in q.rhs.coords], "", [], [], "index")
            lane, slot, instr = linear % g, None, {}
            rel = "0 <= index < extent in every dimension"
        else:
            lane, slot = linear % g, ev(site.env["slot"])
            uses_slot = any(self.view.accesses[s.access].kind == "read_all" for s in q.lhs.chain[:1] + q.rhs.chain[:1]
                            if s.access >= 0)
            slot = slot if uses_slot else None
            lhs = self._side("lhs", q.lhs, site, ev, lane, slot)
            rhs = self._side("rhs", q.rhs, site, ev, lane, slot)
            instr = {}
            rel = "tags equal" if relation == "eq" else "the assert_tag relation"
            if relation == "mask_rel":
                kept = bool(model.eval(q.extras["kept"], model_completion=True))
                lhs.label, rhs.label = "element", "kept by the selects at" if kept else "masked by the selects at"
                rhs.coordinates, rhs.chain = sorted({self.view.span(s).line for s in q.lhs.flow_sites}), []
                rhs.kind = "index"
                rel = "an element is kept by the mask exactly when the assert_mask predicate holds for its tag"
        return Counterexample(
            block=[ev(site.env[f"bid:{d}"]) for d in range(len(self.view.launch))],
            thread=thread, thread_linear=linear, group_kind=self.view.group_kind, group_size=g,
            group_index=linear // g, lane=linear % g, iterations=self._iterations(site, ev), value_index=slot,
            sizes=sizes, lhs=lhs, rhs=rhs, relation=rel, instruction=instr)

    def _access_counterexample(self, ev, q: Query, relation: str, sizes: dict[str, int]) -> Counterexample:
        first, second = q.lhs_inst, q.rhs_inst
        dims = self.enc.block_dims()
        linear = ev(self.enc.linear_thread(first))
        g = self.view.group_size
        slot, instr = None, {}
        if relation in PATH_RELATIONS:
            lhs, rhs = self.barriers.sides(q, ev, self._iterations)
        elif relation == "stored_tag":
            lhs = self._side("stored value", q.lhs, first, ev, None, None)
            rhs = Side(f"tag of {q.rhs.chain[0].buffer} at the store", None, None, [ev(c) for c in q.rhs.coords],
                       q.rhs.tag_name, [ev(t) for t in q.rhs.tag], [self._point(q.rhs.chain[0], ev)])
        elif relation == "reduce_uniform" and "slot1" in q.extras:  # a reduction over register slots
            slot = ev(q.extras["slot1"])
            lhs = self._side("slot", q.lhs, q.lhs_inst, ev, None, slot)
            rhs = self._side("other slot", q.rhs, q.rhs_inst, ev, None, ev(q.extras["slot2"]))
        elif relation in ("broadcast", "stat_eq", "reduce_uniform"):
            names = {"broadcast": ("value", "row statistic"), "stat_eq": ("row statistic", "other row statistic"),
                     "reduce_uniform": ("lane", "other lane of the group")}[relation]
            lhs = self._side(names[0], q.lhs, q.lhs_inst, ev, None, None)
            rhs = self._side(names[1], q.rhs, q.rhs_inst, ev, None, None)
            if relation == "broadcast" and q.rhs.stat:
                instr = {"dropped": q.rhs.dropped}  # which component of the value's tag the reduction dropped
        elif relation == "k_distinct":
            slot = ev(q.extras["slot"])
            instr = {"k_first": ev(q.extras["k1"]), "k_second": ev(q.extras["k2"])}
            lhs = self._side("A operand, first execution", q.lhs, first, ev, ev(first.env["lane"]),
                             ev(first.env["slot"]))
            rhs = self._side("A operand, second execution", q.rhs, second, ev, ev(second.env["lane"]),
                             ev(second.env["slot"]))
            first = q.site
            linear = ev(self.enc.linear_thread(first))
        elif relation == "write_count" and q.rhs.tag_name == "missing":  # an element nobody writes
            buf = q.lhs.chain[0].buffer
            chain = [self._point(q.lhs.chain[0], ev)] if q.lhs.tag_name == "excluded" else []
            lhs = Side(f"unwritten element of {buf}", None, None, [ev(c) for c in q.lhs.coords], q.lhs.tag_name, [],
                       chain, "access")
            rhs = Side(f"shape of {buf}", None, None, [ev(c) for c in q.rhs.coords], "", [], [], "missing")
        elif relation == "write_count":
            buf = q.lhs.chain[0].buffer
            lhs = Side("store instances", None, None, [ev(q.lhs.coords[0])], "", [], [self._point(q.lhs.chain[0], ev)],
                       "index")
            rhs = Side(f"elements of {buf}", None, None, [ev(q.rhs.coords[0])], "", [], [], "index")
        else:
            names = {"write_once": ("first store", "second store"), "raw_race": ("load", "earlier store"),
                     "arm_race": ("load", "store in the other arm"), "outside_views": ("store", "store"),
                     "war_race": ("load", "later store"), "async_exposed": ("load", "async copy"),
                     "bank_conflicts": ("access", "same access, other lane")}[relation]
            lhs, rhs = (self._access_side(n, alt, inst, ev) for n, alt, inst in
                        ((names[0], q.lhs, first), (names[1], q.rhs, second)))
            if relation == "async_exposed":
                instr = {"waited": ev(q.extras["state"])}
            if relation == "arm_race":
                instr = {"interval": ev(q.extras["interval"])}
            if relation == "outside_views":
                instr = {"address": ev(q.extras["addr"])}
            if relation == "bank_conflicts":
                instr = self._bank_degree(q, ev)
        thread = [ev(first.env[f"tid:{d}"]) for d in range(len(dims))]
        return Counterexample(
            block=[ev(first.env[f"bid:{d}"]) for d in range(len(self.view.launch))], thread=thread,
            thread_linear=linear, group_kind=self.view.group_kind, group_size=g, group_index=linear // g,
            lane=linear % g, iterations=self._iterations(first, ev), value_index=slot, sizes=sizes, lhs=lhs, rhs=rhs,
            relation=ACCESS_RELATIONS[relation], instruction=instr)

    def _access_side(self, label: str, alt: Alt, inst: Instance, ev) -> Side:
        step = alt.chain[0]
        lane = ev(self.enc.linear_thread(inst))
        return Side(label, lane % self.view.group_size, None, [ev(c) for c in alt.coords], step.buffer, [],
                    [self._point(step, ev)], "access")

    def _bank_degree(self, q: Query, ev) -> dict[str, int]:
        """Conflict degree of the witness phase: the most distinct words any one bank serves
        among the lanes whose guards hold (evaluated concretely: swizzle bits are solver
        variables tied to one lane's address; a guard on data counts every lane)."""
        import numpy as np

        from ..hw.expr import evaluate, symbols
        from .access_queries import BANK_BYTES

        inst = q.lhs_inst
        acc = self.view.accesses[q.lhs.chain[0].access]
        table = self.view.kf.table
        width, phase = self.access.bank_unit(acc.aid)
        start = ev(self.enc.linear_thread(inst)) // phase * phase
        env: dict = {}
        rest = np.arange(start, start + phase)
        for d, extent in enumerate(self.enc.block_dims()):
            env[f"tid:{d}"] = rest % extent
            rest = rest // extent

        def bind(eid: int) -> bool:
            """The values of the names `eid` reads, in the counterexample; False: one is not an
            instance's (a value the guard reads from data)."""
            for name in symbols(table, eid):
                if name.startswith("size:"):
                    env[name] = ev(self.enc.size(name))
                elif name not in env:
                    if name not in inst.env:
                        return False
                    env[name] = ev(inst.env[name])
            return True

        bind(acc.addr)
        words = np.broadcast_to(np.asarray(evaluate(table, acc.addr, env)) * width // BANK_BYTES, (phase,))
        running = np.ones(phase, dtype=bool)
        for cond, polarity in self.view.all_guards(acc.stmt):
            if bind(cond):  # found by review: lanes a guard stops were counted (4-way for a 2-way)
                held = np.broadcast_to(np.asarray(evaluate(table, cond, env)) != 0, (phase,))
                running &= held if polarity else ~held
        words = words[running]
        per_bank = {int(b): len(set(words[words % BANKS == b].tolist())) for b in np.unique(words % BANKS)}
        bank = max(per_bank, key=lambda b: per_bank[b])
        return {"degree": per_bank[bank], "bank": bank, "word_first": ev(q.extras["word1"]),
                "word_second": ev(q.extras["word2"])}

    def _iterations(self, inst: Instance, ev) -> dict[str, int]:
        out = {}
        names = [self.view.loops[h].var for h in self.view.loops]
        for h in self.view.enclosing_loops(inst.stmt):
            info = self.view.loops[h]
            key = info.var if names.count(info.var) == 1 else f"{info.var}@{self.view.span(h).line}"
            out[key] = ev(inst.env[f"loop:{h}"])
        return out

    def _side(self, label: str, alt: Alt, inst: Instance, ev, lane, slot) -> Side:
        use_span = self.view.span(inst.stmt)
        chain = [ChainPoint("use", _loc(use_span), "", ev(self.enc.linear_thread(inst)), self._iterations(inst, ev))]
        for step in alt.chain:
            if step.role == "mma-operand":
                chain.append(ChainPoint("mma-operand", _loc(self.view.span(step.stmt)), step.buffer,
                                        ev(self.enc.linear_thread(step.inst)), self._iterations(step.inst, ev),
                                        step.note))
                continue
            chain.append(self._point(step, ev))
        return Side(label, lane, slot, [ev(c) for c in alt.coords], alt.tag_name,
                    [ev(t) for t in alt.tag] if alt.tag is not None else [], chain)

    def _point(self, step: Step, ev) -> ChainPoint:
        span = self.view.span(step.stmt)
        thread = ev(self.enc.linear_thread(step.inst))
        notes = [step.note] if step.note else []  # e.g. an unwritten read (solver/unwritten.py)
        acc = self.view.accesses[step.access]
        if acc.kind in ("read_all", "write_all"):
            notes.append(f"slot {ev(step.inst.env['slot'])}")
        note = "; ".join(notes)
        return ChainPoint(step.role, _loc(span), step.buffer, thread, self._iterations(step.inst, ev), note)

    def _message(self, relation: str, cex: Counterexample, site: int) -> str:
        if relation in ACCESS_RELATIONS:
            return _access_message(relation, cex)
        if relation == "in_bounds":
            return (f"index {tuple(cex.lhs.coordinates)} is outside {cex.lhs.label.split()[-1]} of shape "
                    f"{tuple(cex.rhs.coordinates)}")
        if relation == "k_pairing":
            return (f"K tags differ: A operand lane {cex.lhs.lane} value {cex.lhs.value_index} has K tag "
                    f"{_k_of(cex.lhs.tag, -1)}, B operand lane {cex.rhs.lane} value {cex.rhs.value_index} has K tag "
                    f"{_k_of(cex.rhs.tag, -2)} (both are k = {cex.instruction.get('k')} of the instruction)")
        if relation == "mask_rel":
            lines = ", ".join(map(str, cex.rhs.coordinates)) or "?"
            tag = f"{cex.lhs.tag_name}{tuple(cex.lhs.tag)}"
            if cex.rhs.label.startswith("kept"):
                how = (f"the select at line {lines} keeps it (its condition holds)" if cex.rhs.coordinates
                       else "no select masks it")
                return f"an element tagged {tag} leaks through the mask: {how}, but the predicate fails for it"
            return (f"an element tagged {tag} is masked off by the select at line {lines}, but the predicate holds "
                    f"for it: the mask removes an element it should keep")
        if not cex.lhs.tag or not cex.rhs.tag:
            return "an untagged value (Top) reaches the assertion on this path"
        if relation == "rel" and site in self.view.kf.relation_texts:
            return _relation_message(*self.view.kf.relation_texts[site], cex)
        return f"tag relation fails: lhs tag {tuple(cex.lhs.tag)} vs rhs tag {tuple(cex.rhs.tag)}"


def _relation_message(text: str, comps: tuple[tuple[str, int, int], ...], cex: Counterexample) -> str:
    """`tag relation `ta[1] == tb[0]` fails: ta[1] = 61, tb[0] = 59 (lhs A(63, 61), rhs B(59, 63))`."""
    values = []
    for name, side, idx in comps:
        tag = (cex.lhs, cex.rhs)[side].tag
        values.append(f"{name} = {tag[idx] if -len(tag) <= idx < len(tag) else '?'}")
    shown = f": {', '.join(values)}" if values else ""
    return (f"tag relation `{text}` fails{shown} (lhs {cex.lhs.tag_name}{tuple(cex.lhs.tag)}, "
            f"rhs {cex.rhs.tag_name}{tuple(cex.rhs.tag)})")


def _access_message(relation: str, c: Counterexample) -> str:
    lhs, rhs = c.lhs, c.rhs
    at = tuple(lhs.coordinates)
    # AMD waves order their own accesses; on NVIDIA every thread is its own ordering group
    who = " of another wave" if c.group_kind == "wave" else ""
    t_l = lhs.chain[0].thread if lhs.chain else None
    t_r = rhs.chain[0].thread if rhs.chain else None
    if relation in PATH_RELATIONS:
        return path_message(relation, c, t_l, t_r)
    if relation == "stored_tag":
        return (f"stores a value tagged {lhs.tag_name}{tuple(lhs.tag)} at {rhs.tag_name} coordinates "
                f"{tuple(rhs.coordinates)}, whose tag is {tuple(rhs.tag)}" if lhs.tag else
                "stores an untagged value (Top) on this path")
    if relation == "write_once":
        where = "" if (t_l, lhs.chain[0].iterations) != (t_r, rhs.chain[0].iterations) else " of two different blocks"
        return (f"element {at} of {lhs.tag_name} is written twice: by thread {t_l} {lhs.chain[0].iterations} and by "
                f"thread {t_r} {rhs.chain[0].iterations}{where}")
    if relation == "write_count" and rhs.kind == "missing":
        buf = lhs.label.rsplit(" ", 1)[-1]
        if lhs.tag_name == "excluded":
            return (f"element {at} of {buf} (shape {tuple(rhs.coordinates)}) is never written: the only store "
                    f"instance that writes it, thread {t_l} {lhs.chain[0].iterations}, is excluded by the store's "
                    f"guard (sizes {c.sizes})")
        return (f"element {at} of {buf} (shape {tuple(rhs.coordinates)}) is never written: the launch's blocks "
                f"cover only {max(at)} of "
                f"that dimension (sizes {c.sizes})")
    if relation == "write_count":
        return f"{lhs.coordinates[0]} store instances for {rhs.coordinates[0]} elements (sizes {c.sizes})"
    if relation == "outside_views":
        return (f"thread {t_l} stores through {lhs.tag_name} into storage element {c.instruction.get('address')}, "
                f"which lies in a tagged subview of the same storage: it overwrites what that subview's tag claims")
    if relation == "arm_race":
        return (f"thread {t_l} loads {lhs.tag_name}{at} while thread {t_r}{who} stores it in the other arm of the "
                f"`if`, after as many barriers of its arm ({c.instruction.get('interval')}): the same barrier "
                f"interval, so nothing orders them")
    if relation == "raw_race":
        return (f"thread {t_l} loads {lhs.tag_name}{at}, stored by thread {t_r}{who}, with no "
                f"syncthreads() in between on some path")
    if relation == "war_race":
        return (f"thread {t_r} overwrites {lhs.tag_name}{at} while thread {t_l}{who} may not have read it "
                f"yet: no syncthreads() between the load and the store on some path")
    if relation == "async_exposed":
        why = ("not waited for on some path (no async_wait(), or an async_wait(n) that leaves its copy group in "
               "flight)" if c.instruction.get("waited") == 0 else
               "no syncthreads() after the copier's async_wait() on some path")
        return f"thread {t_l} loads {lhs.tag_name}{at}, copied asynchronously by thread {t_r}: {why}"
    if relation == "broadcast":
        dropped = c.instruction.get("dropped", -1)
        row = (lhs.tag[:-1] if dropped < 0 else lhs.tag[:dropped] + lhs.tag[dropped + 1:])[:len(rhs.tag)]
        return f"the statistic of row {tuple(rhs.tag)} is applied to a value tagged {tuple(lhs.tag)} (row {tuple(row)})"
    if relation == "stat_eq":
        return f"statistics of two different rows are combined: {tuple(lhs.tag)} and {tuple(rhs.tag)}"
    if relation == "reduce_uniform" and lhs.label == "slot":
        return (f"the slot reduction mixes rows: slot {lhs.value_index} of thread {t_l} holds {tuple(lhs.tag)}, slot "
                f"{rhs.value_index} holds {tuple(rhs.tag)}")
    if relation == "reduce_uniform":
        return (f"the reduction mixes rows: lane {t_l} holds {tuple(lhs.tag)}, lane {t_r} of the same group holds "
                f"{tuple(rhs.tag)}")
    if relation == "k_distinct":
        return (f"K tag {lhs.tag[-1] if lhs.tag else '?'} is accumulated twice into accumulator slot "
                f"{c.value_index}: at {lhs.chain[0].iterations if lhs.chain else {}} (k={c.instruction['k_first']}) "
                f"and at {rhs.chain[0].iterations if rhs.chain else {}} (k={c.instruction['k_second']})")
    d = c.instruction
    return (f"{d['degree']}-way bank conflict: lanes {lhs.lane} and {rhs.lane} access words {d['word_first']} and "
            f"{d['word_second']} of bank {d['word_first'] % BANKS}")


def _rel_off_site(inv: str, span, relation: str = "rel", statement: str = "assert_tag") -> RuleError:
    """A rule bug, not a kernel bug: `rel` (`mask_rel`) checks the lambda of an assert_tag
    (assert_mask), and this site has none."""
    call = "assert_tag(x, y, lambda ...)" if statement == "assert_tag" else "assert_mask(x, lambda ...)"
    fact = "assert_rel" if statement == "assert_tag" else "assert_mask"
    return RuleError(f"the rule of '{inv}' emits an obligation of relation '{relation}' at {span.path}:{span.line}:"
                     f"{span.col}, which is not an {statement}: '{relation}' checks the lambda of an "
                     f"{call}, so bind the obligation's kernel and site with {fact}(k, s, ...)")


def _wrong_operands(inv: str, relation: str, lhs: int, rhs: int, span) -> RuleError:
    """A rule bug: the obligation's operand ids are not of the kinds its relation takes (e.g. a value id
    where `in_bounds` takes an access id); docs/writing-invariants.md lists what each relation takes."""
    return RuleError(f"the rule of '{inv}' emits an obligation '{relation}' at {span.path}:{span.line}:{span.col} "
                     f"whose operands ({lhs}, {rhs}) are not ids of the kinds '{relation}' takes "
                     f"(see docs/writing-invariants.md)")


def _k_of(tag: list[int], idx: int):
    if not tag:
        return "Top"
    return tag[idx] if len(tag) >= -idx else tag[0]


def _loc(span) -> Location:
    return Location.of(span)


class _Evaluator:
    def __init__(self, model: z3.ModelRef):
        self.model = model

    def __call__(self, term) -> int:
        v = self.model.eval(term, model_completion=True)
        if z3.is_true(v):
            return 1
        if z3.is_false(v):
            return 0
        return v.as_long()


def _report_order(f: Finding) -> tuple[int, int, str]:
    return (f.location.line, f.location.col, f.invariant)
