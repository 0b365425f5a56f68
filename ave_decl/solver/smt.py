"""Z3 encoding of the expression DAG and of dynamic instances (block, thread, loop iterations).

Encoding (docs/smt.md): unbounded integers; `//` and `%` are Z3's div/mod, equal to Python's
floor semantics for positive divisors (the only ones the front end produces for layouts and
lane maps), by a negative constant rewritten to floor semantics (`_by_negative_constant`);
symbolic divisors stay nonlinear, with Z3's rounding when negative. Shifts by constants are
multiplications or divisions by powers of two; `^ & | ~` go through 32-bit two's-complement
bit-vectors (Int2BV / BV2Int), exact for values in [-2^31, 2^31).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import z3

from ..facts.view import KernelView
from . import budgets
from .divmod import DivModSimplifier
from .raw_terms import INT_BINARY, assert_all, compare, int_binary, int_const, is_int_term, negation, numeral
from .term_templates import TermTemplates
from .proof_memo import FormulaDigester
from .proof_memo import enabled as proof_memo_enabled

BV_WIDTH = 32
NORMALISE_DIVMOD = True  # bench/divmod.py turns it off to measure the normalisation's effect


@dataclass
class Instance:
    """One dynamic execution of a statement: the Z3 variables that name it."""

    label: str
    stmt: int
    env: dict[str, z3.ExprRef] = field(default_factory=dict)  # tid:d, bid:d, loop:h, slot
    constraints: list[z3.BoolRef] = field(default_factory=list)
    # the first `launch` constraints are the block ids' ranges, the first `ranges` the launch,
    # loop and slot ranges (the rest: guards)
    launch: int = 0
    ranges: int = 0

    def var(self, name: str) -> z3.ExprRef:
        return self.env[name]

    def copy(self, label: str) -> "Instance":
        """The same execution under another label, to rebind some of its variables."""
        return Instance(label, self.stmt, dict(self.env), list(self.constraints), self.launch, self.ranges)


class Encoder:
    """Builds Z3 terms for one kernel. Sizes (size:M ...) are shared by all instances."""

    def __init__(self, view: KernelView, ctx: z3.Context | None = None):
        self.view = view
        self.nodes = view.kf.table.nodes
        # A Z3 context per kernel: models (and so counterexamples) do not depend on which other
        # kernels were checked before in the same process. `ctx`: the one the kernel's derived
        # facts were proved in (derived_facts.add_semantic_facts), never another kernel's.
        self.ctx = ctx if ctx is not None else z3.Context()
        self.sizes: dict[str, z3.ArithRef] = {}
        self._counter = itertools.count()
        self.ranges: dict[int, tuple[int, int]] = {}  # z3 ast id of a variable -> known [lo, hi]
        self._ranged: list[z3.ArithRef] = []  # keeps those variables alive: Z3 reuses freed ids
        self.side: list[z3.BoolRef] = []  # definitional constraints of bit decompositions
        self.bit_decompositions_asked = 0  # calls of bits_of: terms built without any do not depend on `side`
        self._bits: dict[int, list[z3.BoolRef]] = {}
        self._functions: dict[str, z3.FuncDeclRef] = {}
        self.index_reads: list[tuple[str, list[z3.ArithRef], z3.ArithRef]] = []  # of the last prepared query
        self._normaliser: DivModSimplifier | None = None  # shared by this kernel's queries
        self._base: list[z3.BoolRef] | None = None
        self._digester: FormulaDigester | None = None  # proof_memo keys of this kernel's queries
        self.use_proof_memo = proof_memo_enabled()  # read once per kernel (AVE_PROOF_MEMO)
        self._numerals: dict[int, z3.ArithRef] = {}
        self._templates = TermTemplates(self.nodes, self.ctx)
        self._default_tactic: z3.Tactic | None = None  # `attempt_solver`'s, made once per kernel

    def normaliser(self) -> DivModSimplifier:
        """The kernel's div/mod simplifier: queries share instances, chains and base
        constraints, so each term is rewritten once per kernel, not once per query."""
        if self._normaliser is None:
            self._normaliser = DivModSimplifier(self.ranges, self.ctx)
        return self._normaliser

    def set_range(self, var: z3.ArithRef, lo: int, hi: int) -> None:
        """Record that every execution keeps `var` in [lo, hi] (a thread id, lane, slot, loop counter)."""
        key = var.get_id()
        if self.ranges.get(key) == (lo, hi):
            return  # set again (the same variable of an earlier obligation): every memo stays true
        self.ranges[key] = (lo, hi)
        self._ranged.append(var)
        if self._normaliser is not None and self._normaliser.knows(key):
            self._normaliser = None  # a rewrite memoised before this range was known
        digester = getattr(self, "_digester", None)  # an Encoder built field by field (tests) has none
        if digester is not None and digester.knows(key):
            digester.forget()  # a digest made before this range was known

    def query_key(self, formulas: list[z3.BoolRef]) -> bytes | None:
        """The proof memo's key of a query's formulas with the ranges of their variables
        (solver/proof_memo.py); None when the query is not digested or the memo is off."""
        return self.content_key(formulas) if self.use_proof_memo else None

    def content_key(self, formulas: list[z3.BoolRef]) -> bytes | None:
        """The alpha-invariant digest of formulas with their variables' ranges, memo or not:
        equal keys are equisatisfiable queries (one obligation's slices share their proofs
        by it); None when they cannot be digested."""
        return self._digests().key(formulas)

    def content_key_of_chunks(self, chunks: list[list[z3.BoolRef]], prefixes: dict) -> bytes | None:
        """`content_key` of the chunks joined, sharing the work on their common first chunks
        through `prefixes` (FormulaDigester.chunked_key: all chunks but the last kept alive)."""
        return self._digests().chunked_key(chunks, prefixes)

    def _digests(self) -> FormulaDigester:
        if self._digester is None:
            self._digester = FormulaDigester(self.ctx, self.ranges)
        return self._digester

    def int_var(self, name: str) -> z3.ArithRef:
        """z3py's `Int(name)`, the same constant (raw_terms.int_const)."""
        return int_const(name, self.ctx)

    def ranged_var(self, name: str, lo: int, hi: int) -> z3.ArithRef:
        """An integer variable that every execution keeps in [lo, hi], its range part of its name:
        obligations reuse names (`restart_names`) and the kernel's memos (div/mod normal forms,
        digests) hold rewrites that relied on a variable's range, so one name must never stand
        for a variable with another range, or with none, in a later obligation."""
        var = self.int_var(f"{name}@{lo}..{hi}")
        self.set_range(var, lo, hi)
        return var

    def int_val(self, value: int) -> z3.ArithRef:
        """A numeral, made once per kernel (z3py's IntVal goes through a string each time)."""
        made = self._numerals.get(value)
        if made is None:
            made = self._numerals[value] = z3.IntVal(value, self.ctx)
        return made

    def bool_val(self, value: bool) -> z3.BoolRef:
        return z3.BoolVal(value, self.ctx)

    def solver(self, timeout_ms: int, rlimit: int = 0) -> z3.Solver:
        """A solver with a wall-clock timeout and, when `rlimit` > 0, a deterministic work budget
        per check (Z3 resource units, budgets.py)."""
        return _budgeted(z3.Solver(ctx=self.ctx), timeout_ms, rlimit)

    def attempt_solver(self, timeout_ms: int, rlimit: int, seed: int | None = None,
                       hnf_cuts: bool = True) -> z3.Solver:
        """A solver for one check of formulas asserted once (a budgeted attempt): Z3's default
        tactic as a solver, the tactic made once per kernel. What `z3.Solver()` runs on its first
        check is that same tactic, but built anew for each solver (the QF_LIA branch's tactic
        tree, its parameters set node by node) and torn down with it: 0.8 of the 1.5 ms a
        trivial check cost, and queries are checked thousands of times per kernel
        (docs/performance.md, Session 24). Not for push/pop or assertions added after a check
        (only `KernelSolver._smallest`'s rare fallback does so): such a solver runs the whole
        tactic again on every check, where `solver`'s switches to Z3's incremental core. Its
        settings are all given to each solver (see the body). `hnf_cuts=False`: without the integer solver's Hermite-normal-form
        cuts (see `quick_check`)."""
        if self._default_tactic is None:
            self._default_tactic = z3.Tactic("default", self.ctx)
        s = _budgeted(self._default_tactic.solver(), timeout_ms, rlimit)
        # set every time: the shared tactic keeps the arithmetic settings a solver gave it, so
        # an attempt without HNF cuts would otherwise leave them off for the next solver
        s.set("random_seed", 0 if seed is None else seed)
        s.set("arith.enable_hnf", hnf_cuts)
        return s

    def query_solver(self, timeout_ms: int, formulas: list[z3.BoolRef], rlimit: int = 0,
                     terms: tuple[z3.ExprRef, ...] = ()) -> z3.Solver:
        """A solver holding the query `formulas` (see `prepare`)."""
        return self.solver_holding(self.prepare(formulas, terms), timeout_ms, rlimit)

    def prepare(self, formulas: list[z3.BoolRef], terms: tuple[z3.ExprRef, ...] = ()) -> list[z3.BoolRef]:
        """What a query asserts: `formulas` div/mod normalised by variable ranges (an equivalent
        formula; the ranges it relied on are asserted with it), plus the value range and
        injectivity of every index-tensor read it contains (`index_reads`), or that `terms`
        contain (terms that later push/pop queries will constrain)."""
        formulas = self.normaliser().normalise(formulas) if NORMALISE_DIVMOD else list(formulas)
        return formulas + self.index_facts([*formulas, *terms])

    def index_facts(self, formulas: list[z3.BoolRef]) -> list[z3.BoolRef]:
        """The value range and injectivity of every index-tensor read in the formulas (which
        become this encoder's `index_reads`)."""
        self.index_reads = self._index_reads(formulas)
        facts = []
        for name, args, app in self.index_reads:
            lo, hi, injective = self.view.index_values[name]
            facts += [app >= self.int_term(lo, {}), app < self.int_term(hi, {})]
            if injective and len(args) == 1:
                facts.append(self._functions[f"uf:{name}:inv"](app) == args[0])
        return facts

    def solver_holding(self, prepared: list[z3.BoolRef], timeout_ms: int, rlimit: int = 0) -> z3.Solver:
        s = self.solver(timeout_ms, rlimit)
        assert_all(s, prepared)
        return s

    def proves(self, prepared: list[z3.BoolRef], timeout_ms: int,
               seeds: tuple[int, ...] = budgets.QUICK_PROOF_SEEDS, rlimit: int = budgets.QUICK_PROOF_RLIMIT) -> bool:
        """Whether a few fresh solvers, each with a deterministic work budget and its own random
        seed, prove the prepared query unsatisfiable. Why: Z3's search on index algebra
        with div/mod varies a lot with its heuristic choices: gemm_mfma16's `write_once` at line
        52 took 0.01 s or over 10 s (the wall-clock timeout) depending on the seed and on which
        terms the kernel's earlier obligations had created, so the same kernel was VERIFIED or
        UNKNOWN from run to run on a loaded machine. A short budgeted portfolio settles the easy
        proofs the same way every time; an UNSAT here is an UNSAT of the very same formulas. A
        SAT ends the attempt (the full solver then finds the counterexample, as before); only
        "budget spent" tries the next seed. Each attempt gets at most a quarter of the timeout.
        Most queries end here, so no solver holds them before (asserting a query's hundreds of
        formulas into a solver never checked cost a fifth of production attention's check)."""
        return self.quick_check(prepared, timeout_ms, seeds, rlimit)[0] == z3.unsat

    def quick_check(self, prepared: list[z3.BoolRef], timeout_ms: int,
                    seeds: tuple[int, ...] = budgets.QUICK_PROOF_SEEDS,
                    rlimit: int = budgets.QUICK_PROOF_RLIMIT) -> tuple[z3.CheckSatResult, z3.Solver | None]:
        """`proves`'s budgeted attempts, with what decided: (unsat or sat, the attempt's solver),
        or (unknown, None) when every attempt spent its budget. A SAT here is a violation the
        full solver need not find again (it cost a second solve of every violated query).
        The attempts go without Hermite-normal-form cuts: on the index algebra of the examples
        they cost more than they prune (production attention 108.5 -> 90.6 G instructions,
        speed/gemm_mma_pipelined ~20 % less time; every example's report unchanged); an attempt
        that runs out of budget without them leaves the query to the full solver, which keeps
        Z3's defaults."""
        for seed in seeds:
            attempt = self.attempt_solver(max(1, timeout_ms // 4), rlimit, seed, hnf_cuts=False)
            assert_all(attempt, prepared)
            result = attempt.check()
            if result != z3.unknown:  # a model is a model: no other seed can prove it
                return result, attempt
        return z3.unknown, None

    def _index_reads(self, formulas: list[z3.BoolRef]) -> list[tuple[str, list[z3.ArithRef], z3.ArithRef]]:
        """The index-tensor applications in the formulas: (tensor, arguments, application)."""
        tensors = {self._functions[k].name(): k[3:] for k in self._functions if not k.endswith(":inv")}
        if not tensors:
            return []
        seen: set[int] = set()
        out = []
        stack = list(formulas)
        while stack:
            t = stack.pop()
            if t.get_id() in seen or not z3.is_app(t):
                continue
            seen.add(t.get_id())
            if t.decl().name() in tensors and t.num_args() > 0:
                out.append((tensors[t.decl().name()], [t.arg(i) for i in range(t.num_args())], t))
            stack.extend(t.arg(i) for i in range(t.num_args()))
        return out

    def restart_names(self) -> None:
        """Name the next obligation's instances from the first fresh name again: obligations are
        solved apart, and an obligation that builds what an earlier one built (the same chain
        from the same kind of instance) then gets the same hash-consed terms, whose div/mod
        normal forms and digests the kernel's memos already hold (production attention's nine
        K-pairing obligations: normalising 0.82 -> 0.28 s). Sound because a ranged variable's
        name carries its range (`ranged_var`): a reused name is the same variable with the same
        range, or one that never had any; nothing built for an earlier obligation is put into a
        later one's queries (the expander's memo is per instance object)."""
        self._counter = itertools.count()

    def names_used(self) -> int:
        """How many fresh names this obligation took so far (`resume_names` goes on from there)."""
        used = next(self._counter)
        self._counter = itertools.count(used)
        return used

    def resume_names(self, used: int) -> None:
        """Name the next instances as they were named after `used` fresh names: the kills of an
        obligation built later get the names they get when built right after its queries
        (solver/families.py builds several obligations' queries before their kills)."""
        self._counter = itertools.count(used)

    def fresh(self, prefix: str) -> str:
        """A variable-name prefix unique within this kernel (deterministic from run to run)."""
        return f"{prefix}!{next(self._counter)}"  # "!": labels end in digits too (u1 + 377 vs u + 1377)

    # ------------------------------------------------------------ terms
    def size(self, name: str) -> z3.ArithRef:
        if name not in self.sizes:
            self.sizes[name] = z3.Int(name.split(":", 1)[1], self.ctx)
        return self.sizes[name]

    def term(self, eid: int, env: dict[str, z3.ExprRef]) -> z3.ExprRef:
        """The Z3 term of expression `eid` with its symbols bound by `env`: from the
        expression's template when it has one (term_templates.py: the same hash-consed term,
        one C call instead of one per node), else built node by node."""
        made = self._templates.instantiate(eid, env, self._built)
        return made if made is not None else self._term(eid, env, {})

    def _built(self, eid: int, env: dict[str, z3.ExprRef]) -> z3.ExprRef:
        return self._term(eid, env, {})

    def int_term(self, eid: int, env: dict[str, z3.ExprRef]) -> z3.ArithRef:
        return as_int(self.term(eid, env))

    def bool_term(self, eid: int, env: dict[str, z3.ExprRef]) -> z3.BoolRef:
        return as_bool(self.term(eid, env))

    def interval(self, term: z3.ExprRef) -> tuple[int, int] | None:
        """Known bounds of a term: constants, ranged variables, and linear forms, `//` and `%`
        by constants over them (the same analysis the div/mod normalisation uses)."""
        return DivModSimplifier(self.ranges, self.ctx).interval(term)

    def side_snapshot(self) -> tuple[list[z3.BoolRef], dict[int, list[z3.BoolRef]]]:
        return list(self.side), dict(self._bits)

    def restore_side(self, snapshot: tuple[list[z3.BoolRef], dict[int, list[z3.BoolRef]]]) -> None:
        """Forget bit decompositions made since the snapshot (they are per obligation)."""
        self.side, self._bits = list(snapshot[0]), dict(snapshot[1])

    def decompositions(self) -> list[tuple[z3.ArithRef, list[z3.BoolRef]]]:
        """The bit decompositions `side` states, in the order they were made (a decomposed term
        may read the bits of one made before): each term and its bits, least significant first."""
        out = []
        for definition in self.side:
            term = definition.arg(0)
            out.append((term, self._bits[term.get_id()]))
        return out

    def bits_of(self, term: z3.ArithRef, width: int) -> list[z3.BoolRef]:
        """Boolean bits of a term known to lie in [0, 2^width): term == sum(bit_i * 2^i). A term
        decomposed before into fewer bits (XORed with a narrower partner then) gets its higher
        bits as False: that decomposition already states the term is below 2^(its width)."""
        self.bit_decompositions_asked += 1
        key = term.get_id()
        if key not in self._bits:
            bits = [z3.Bool(self.fresh("bit"), self.ctx) for _ in range(width)]
            self.side.append(term == z3.Sum([z3.If(b, 2 ** i, 0) for i, b in enumerate(bits)]))
            self._bits[key] = bits
        bits = self._bits[key]
        return bits if len(bits) >= width else bits + [z3.BoolVal(False, self.ctx)] * (width - len(bits))

    def _bitwise(self, op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef | None:
        """`^ & |` on small non-negative operands as Boolean bits (much faster than Int2BV)."""
        ia, ib = self.interval(a), self.interval(b)
        if ia is None or ib is None or ia[0] < 0 or ib[0] < 0 or max(ia[1], ib[1]) >= 1 << 16:
            return None
        width = max(1, max(ia[1], ib[1]).bit_length())
        if op == "and" and ib[0] == ib[1]:  # a mask: no bits needed for the constant
            bits = self.bits_of(a, width)
            return z3.Sum([z3.If(bits[i], 2 ** i, 0) for i in range(width) if (ib[0] >> i) & 1] or
                          [z3.IntVal(0, self.ctx)])
        xa, xb = self.bits_of(a, width), self.bits_of(b, width)
        f = {"xor": z3.Xor, "and": z3.And, "or": z3.Or}[op]
        return z3.Sum([z3.If(f(xa[i], xb[i]), 2 ** i, 0) for i in range(width)])

    def _term(self, eid: int, env, memo) -> z3.ExprRef:
        if eid in memo:
            return memo[eid]
        n = self.nodes[eid]
        if n.op == "const":
            r: z3.ExprRef = self.int_val(n.value)
        elif n.op == "uf":
            r = self._uf(n.name, [as_int(self._term(a, env, memo)) for a in n.args])
        elif n.op == "sym":
            if n.name.startswith("size:"):
                r = self.size(n.name)
            elif n.name in env:
                r = env[n.name]
            else:
                raise KeyError(f"symbol {n.name} has no value in this context")
        else:
            args = [self._term(a, env, memo) for a in n.args]
            r = None
            if n.op in ("xor", "and", "or"):
                r = self._bitwise(n.op, as_int(args[0]), as_int(args[1]))
            if r is None:
                r = _apply(n.op, args, [self.nodes[a] for a in n.args])
        memo[eid] = r
        return r

    def _uf(self, name: str, args: list[z3.ArithRef]) -> z3.ArithRef:
        """An index tensor read: an uninterpreted function of the coordinates. Its declared value
        range, and for a permutation injectivity (through an inverse function), are added by
        `query_solver` for every application a query contains (terms are shared between queries,
        so constraints attached at construction time would be lost or leak)."""
        key = f"uf:{name}"
        if key not in self._functions:
            sorts = [z3.IntSort(self.ctx)] * len(args)
            self._functions[key] = z3.Function(f"{name}", *sorts, z3.IntSort(self.ctx))
            self._functions[key + ":inv"] = z3.Function(f"{name}_inverse", z3.IntSort(self.ctx), z3.IntSort(self.ctx))
        return self._functions[key](*args)

    # -------------------------------------------------------- instances
    def base_constraints(self) -> list[z3.BoolRef]:
        """Assumptions over sizes; they mention no thread or loop variable (built once: every
        query of the kernel carries them)."""
        if self._base is None:
            self._base = [self.bool_term(e, {}) for e in self.view.assumptions]
        return self._base

    def block_dims(self) -> list[int]:
        out = []
        for _g, b in self.view.launch:
            node = self.nodes[b]
            out.append(node.value if node.op == "const" else 1)
        return out

    def block_size(self) -> int:
        total = 1
        for d in self.block_dims():
            total *= d
        return total

    def new_instance(self, stmt: int, label: str, *, share_block: Instance | None = None,
                     share_thread: Instance | None = None, loops: dict[int, z3.ExprRef] | None = None,
                     with_guards: bool = True, slots: int | None = None) -> Instance:
        """Fresh variables for a statement execution, constrained to the launch and loop ranges.
        `slots`: the register slot's range [0, slots) where the caller constrains it (an
        operand's value slot); an ldmatrix's slots are its own."""
        tag = self.fresh(label)
        inst = Instance(label, stmt)
        for d, (grid, _block) in enumerate(self.view.launch):
            if share_block is not None:
                inst.env[f"bid:{d}"] = share_block.env[f"bid:{d}"]
            elif self.nodes[grid].op == "const" and self.nodes[grid].value == 1:
                inst.env[f"bid:{d}"] = self.int_val(0)
            else:
                b = self.int_var(f"{tag}.bid{d}")
                inst.env[f"bid:{d}"] = b
                inst.constraints += [int_binary("ge", b, numeral(0, self.ctx)), compare("lt", b, self.int_term(grid, {}))]
        inst.launch = len(inst.constraints)
        for d, extent in enumerate(self.block_dims()):
            if share_thread is not None:
                inst.env[f"tid:{d}"] = share_thread.env[f"tid:{d}"]
            elif extent == 1:
                inst.env[f"tid:{d}"] = self.int_val(0)
            else:
                t = self.ranged_var(f"{tag}.tid{d}", 0, extent - 1)
                inst.env[f"tid:{d}"] = t
                inst.constraints += [int_binary("ge", t, numeral(0, self.ctx)), int_binary("lt", t, numeral(extent, self.ctx))]
        given = loops or {}
        for h in self.view.enclosing_loops(stmt):
            info = self.view.loops[h]
            if h in given:
                inst.env[f"loop:{h}"] = given[h]
                continue
            lo, hi = self.nodes[info.lo], self.nodes[info.hi]
            if lo.op == "const" and hi.op == "const":
                x = self.ranged_var(f"{tag}.{info.var}", lo.value, hi.value - 1)
            else:
                x = self.int_var(f"{tag}.{info.var}")
            inst.env[f"loop:{h}"] = x
            inst.constraints += self.loop_range(h, x, inst.env)
        own = self.view.slot_range.get(stmt)  # an ldmatrix: its load is one per register slot
        slots = own if slots is None else slots
        inst.env["slot"] = self.int_var(f"{tag}.slot") if slots is None else \
            self.ranged_var(f"{tag}.slot", 0, slots - 1)
        if own is not None:
            inst.constraints += [int_binary("ge", inst.env["slot"], numeral(0, self.ctx)),
                                 int_binary("lt", inst.env["slot"], numeral(own, self.ctx))]
        inst.ranges = len(inst.constraints)
        if with_guards:
            for cond, pol in self.view.all_guards(stmt):
                c = self.bool_term(cond, inst.env)
                inst.constraints.append(c if pol else negation(c))
        return inst

    def loop_range(self, header: int, x: z3.ArithRef, env: dict[str, z3.ExprRef]) -> list[z3.BoolRef]:
        """lo <= x < hi, and x on the step's grid: the terms `x >= lo, x < hi, (x - lo) % step == 0`
        make, built through the C API (called per kill instantiation: z3py's coercions dominated)."""
        info = self.view.loops[header]
        lo, hi = self.int_term(info.lo, env), self.int_term(info.hi, env)
        step = self.nodes[info.step].value
        out = [compare("ge", x, lo), compare("lt", x, hi)]
        if step != 1:
            offset = int_binary("mod", int_binary("sub", x, lo), numeral(step, self.ctx))
            out.append(int_binary("eq", offset, numeral(0, self.ctx)))
        return out

    def linear_thread(self, inst: Instance) -> z3.ArithRef:
        """The thread's linear id: the term z3py's `total * dim + tid` makes, per dimension from the
        last (through the C API: one of the hottest builders)."""
        dims = self.block_dims()
        total: z3.ArithRef = self.int_val(0)
        for d in reversed(range(len(dims))):
            total = int_binary("add", int_binary("mul", total, numeral(dims[d], self.ctx)), inst.env[f"tid:{d}"])
        return total

    def set_linear_thread(self, inst: Instance, linear: z3.ArithRef) -> None:
        """Replace an instance's thread ids by the decomposition of a linear id."""
        rest = linear
        for d, extent in enumerate(self.block_dims()):
            inst.env[f"tid:{d}"] = int_binary("mod", rest, numeral(extent, self.ctx)) if extent > 1 else self.int_val(0)
            rest = int_binary("floordiv", rest, numeral(extent, self.ctx))


def as_int(x: z3.ExprRef) -> z3.ArithRef:
    return z3.If(x, z3.IntVal(1, x.ctx), z3.IntVal(0, x.ctx)) if z3.is_bool(x) else x


def as_bool(x: z3.ExprRef) -> z3.BoolRef:
    return x if z3.is_bool(x) else x != 0


def _bv(x: z3.ExprRef) -> z3.BitVecRef:
    return z3.Int2BV(as_int(x), BV_WIDTH)


def _int(b: z3.BitVecRef) -> z3.ArithRef:
    return z3.BV2Int(b, is_signed=True)


def _by_negative_constant(op: str, a: z3.ArithRef, c: int) -> z3.ArithRef:
    """Python's `a // c` and `a % c` for a constant c < 0, where Z3's div and mod round the
    other way (the evaluator, hw/expr.py, and the bank enumeration use Python's: a review found
    a conflict the enumeration named under `t // -8` proved absent by Z3's rounding):
    floor(a / c) == (-a) div (-c), a division by a positive constant, and a % c == a - c * (a // c)."""
    quotient = (-a) / (-c)
    return quotient if op == "floordiv" else a - c * quotient


def _apply(op: str, args: list[z3.ExprRef], nodes) -> z3.ExprRef:
    if op in ("land", "lor"):
        a, b = as_bool(args[0]), as_bool(args[1])
        return z3.And(a, b) if op == "land" else z3.Or(a, b)
    if op == "lnot":
        return z3.Not(as_bool(args[0]))
    xs = [as_int(a) for a in args]
    if op in ("floordiv", "mod") and nodes[1].op == "const" and nodes[1].value < 0:
        return _by_negative_constant(op, xs[0], nodes[1].value)
    if len(xs) == 2 and op in INT_BINARY and is_int_term(xs[0]) and is_int_term(xs[1]):
        return int_binary(op, xs[0], xs[1])
    if op == "add":
        return xs[0] + xs[1]
    if op == "sub":
        return xs[0] - xs[1]
    if op == "mul":
        return xs[0] * xs[1]
    if op == "floordiv":
        return xs[0] / xs[1]
    if op == "mod":
        return xs[0] % xs[1]
    if op == "neg":
        return -xs[0]
    if op in ("shl", "shr") and nodes[1].op == "const" and nodes[1].value >= 0:
        factor = 2 ** nodes[1].value
        return xs[0] * factor if op == "shl" else xs[0] / factor
    if op == "shl":
        return _int(_bv(xs[0]) << _bv(xs[1]))
    if op == "shr":
        return _int(_bv(xs[0]) >> _bv(xs[1]))
    if op == "xor":
        return _int(_bv(xs[0]) ^ _bv(xs[1]))
    if op == "and":
        return _int(_bv(xs[0]) & _bv(xs[1]))
    if op == "or":
        return _int(_bv(xs[0]) | _bv(xs[1]))
    if op == "bnot":
        return -xs[0] - 1
    if op == "min":
        return z3.If(xs[0] <= xs[1], xs[0], xs[1])
    if op == "max":
        return z3.If(xs[0] >= xs[1], xs[0], xs[1])
    cmp = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
           "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
    if op in cmp:
        return cmp[op](xs[0], xs[1])
    raise ValueError(f"no Z3 encoding for operator {op}")


def _budgeted(s: z3.Solver, timeout_ms: int, rlimit: int) -> z3.Solver:
    """`s` with a wall-clock timeout and, when `rlimit` > 0, a deterministic work budget per check."""
    s.set("timeout", timeout_ms)
    if rlimit > 0:
        s.set("rlimit", rlimit)
    return s
