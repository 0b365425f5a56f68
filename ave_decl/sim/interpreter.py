"""The concrete simulator: ground truth for the verifier.

An interpreter of the AST (independent of the lowering in `facts/`, so a lowering bug is not replicated
here), vectorised with numpy over all threads of all simulated blocks: every value is an array of
shape (blocks, threads); loops run in order; `if` runs both branches under masks; statements
execute in lockstep, so barriers order phases by construction. Matrix instructions gather their
operands across the lanes of each wave/warp with the instruction library's maps.

Shadow mode carries, for every data value, the tag of its tagged source (the tag function at the
source coordinates) and checks every tag assertion and every matrix instruction's K pairing for
every block, thread, iteration and value: the exhaustive ground truth for the given sizes.
"""
from __future__ import annotations

import math

import numpy as np

from ..hw.dtypes import DTYPES
from ..hw.instructions import Instruction, LoadMatrix
from ..hw.layout import Based, Composed, Layout, Swizzle, buffer_layout, col_major, row_major, storage_size
from ..lang import ast as A
from ..lang.depth import walk
from ..lang.loop_deps import loop_dependence, moves_with
from ..lang.resolve import SLOT_REDUCTIONS, butterfly_operand
from .inputs import random_inputs, tensor_dims, tensor_shape
from .limits import check_memory, check_shared, check_size_values
from .memory import ArrayMemo, MemoryModel
from .race_detector import RaceDetector
from .shadow import ShadowChecks
from .statistics import along_axis, matches_row, reduce_rows
from .state import (
    ITYPE,
    LMAX,
    ROUND,
    ZERO_MARK,
    Buf,
    Data,
    Failure,
    SimResult,
    SimulationError,
    elements,
    is_zero,
    masked_of,
    narrow,
    slot_maps,
)

_DONE = object()  # what next() gives for an arm that ran to its end
_KEEP_PER_NODE = 32  # values eval keeps per integer expression (e.g. ks x v of a GEMM's inner loops)
_KEEP_BYTES = 128 * 2 ** 20  # and in all: a few hundred (B, T) arrays at 1024^3
_ADDRESS_BYTES = 96 * 2 ** 20  # the addresses of accesses kept (memory.ArrayMemo)


class Simulator(MemoryModel, ShadowChecks):
    def __init__(self, kernel: A.Kernel, imports: dict[str, Instruction], sizes: dict[str, int],
                 blocks: list[tuple[int, ...]] | None = None, seed: int = 0, shadow: bool = True,
                 probe: dict | None = None, async_land: str = "wait",
                 index_entries: dict[str, list[list[int]]] | None = None, max_bytes: int | None = None):
        self.k = kernel
        self.max_bytes = max_bytes  # memory limit of the run (limits.check_memory; None: the default)
        self.index_entries = index_entries or {}  # entries an index tensor must hold (a replayed model)
        self.async_land = async_land  # "wait": copies land at the next async_wait(); "issue": at once
        self.imports = imports
        self.sizes = dict(sizes)
        self.seed = seed
        self.shadow = shadow
        self.probe = probe
        self.current: A.Stmt | None = None
        self.env: dict[str, object] = {}
        self.buffers: dict[str, Buf] = {}
        self.loop_vars: dict[str, int] = {}
        self.loop_deps = loop_dependence(kernel)  # the loop variables each name depends on (subviews)
        self.failures: dict[tuple[str, int], Failure] = {}
        self.errors: list[str] = []
        self.probes: list[dict] = []
        self.tag_names: dict[str, int] = {}
        self.constants: dict[tuple[int, tuple[int, int]], np.ndarray] = {}  # _ival's broadcasts
        # eval's reuse of integer expressions, by node id: [node (kept, so its id is not reused),
        # its free names (None: not an integer expression), {ids of their env objects: (those
        # objects, kept alive so the ids are not reused; the value)}]
        self.kept: dict[int, list] = {}
        self.kept_bytes = 0  # the values' bytes in `kept` (at most _KEEP_BYTES)
        self.augmented: dict[int, tuple[A.AugAssign, A.BinOp]] = {}  # _desugared
        self.addresses = ArrayMemo(_ADDRESS_BYTES)  # _flat's (address, in bounds) of kept indices
        with np.errstate(all="ignore"):  # x / 0, inf - inf, overflow: modelled values, not warnings
            self._setup(blocks)

    # --------------------------------------------------------------- set-up
    def _setup(self, blocks) -> None:
        dec = self.k.decorator
        for p in self.k.params:
            if isinstance(p.annotation, A.Name) and p.annotation.id == "int" and p.name not in self.sizes:
                raise SimulationError(f"give a value for size {p.name} (--sizes {p.name}=...)", p.span)
        for p in self.k.params:
            for d in tensor_dims(p):
                if isinstance(d, A.Name) and d.id not in self.sizes:
                    raise SimulationError(f"give a value for size {d.id} (--sizes {d.id}=...)", d.span)
        check_size_values(self.sizes)
        self.shape = (1, 1)  # launch extents are evaluated over sizes only
        self.env = {name: self._ival(value) for name, value in self.sizes.items()}
        self.grid = tuple(self._const(e) for e in elements(dec.kwarg("grid")))
        self.block = tuple(self._const(e) for e in elements(dec.kwarg("block")))
        group = dec.kwarg("wave") or dec.kwarg("warp")
        self.group = self._const(group) if group is not None else 64
        # the unit that executes shared-memory operations in order: a wave (AMD), a thread (NVIDIA)
        ordered = self.group if dec.kwarg("warp") is None else 1
        if any(g < 1 for g in self.grid):
            raise SimulationError(f"the grid {self.grid} is empty at these sizes", dec.kwarg("grid").span)
        # a requested block may carry trailing zeros (reports give 3 dimensions): keep the grid's rank
        requested = [tuple(b)[:len(self.grid)] for b in blocks] if blocks is not None else None
        for b in requested or ():
            if len(b) != len(self.grid) or not all(0 <= x < g for x, g in zip(b, self.grid)):
                raise SimulationError(f"block {b} is outside the grid {self.grid}", dec.span)
        tensors = {p.name: tensor_shape(p, self.sizes) for p in self.k.params if isinstance(p.annotation, A.Subscript)}
        check_memory(tensors, len(requested) if requested is not None else math.prod(self.grid),
                     math.prod(self.block), self.max_bytes)
        self.block_ids = requested if requested is not None else list(np.ndindex(*self.grid))
        self.B, self.T = len(self.block_ids), math.prod(self.block)
        self.shape = (self.B, self.T)
        self.active = np.ones(self.shape, bool)
        # lane = block * T + thread: the flat order of every (B, T) array (memory.MemoryModel._lanes)
        self.all_lanes = np.arange(self.B * self.T)
        self.all_blocks, self.all_threads = self.all_lanes // self.T, self.all_lanes % self.T
        self.lane_rows = self.all_lanes.reshape(self.shape)
        self.block_rows = np.arange(self.B)[:, None]
        self.races = RaceDetector(self.B, self.T, np.arange(self.T) // ordered)
        self.write_counts: dict[str, np.ndarray] = {}
        self.pending: list[tuple] = []  # async copies in flight: (buffer, index, data, stmt, issuing threads, group)
        self.committed = np.zeros(self.shape, ITYPE)  # copy groups each thread has committed (async_commit)
        self.barrier_counts = np.zeros(self.shape, np.int64)  # syncthreads() each thread has reached
        self.branch_barriers: dict[int, tuple[A.Stmt, bool]] = {}  # id(stmt) -> (node, has a barrier inside)
        bids = np.array(self.block_ids, dtype=np.int32).reshape(self.B, len(self.grid))
        self.bid = [np.broadcast_to(np.asarray(bids[:, d])[:, None], self.shape) for d in range(len(self.grid))]
        lin = np.arange(self.T)
        self.tid = []
        for extent in self.block:
            self.tid.append(np.broadcast_to(np.asarray(lin % extent, ITYPE)[None, :], self.shape))
            lin = lin // extent
        self.linear_tid = np.broadcast_to(np.arange(self.T, dtype=ITYPE)[None, :], self.shape)
        self.env = {}
        self.inputs = random_inputs(self.k, self.sizes, self.seed, self.index_entries)
        for p in self.k.params:
            if not isinstance(p.annotation, A.Subscript):
                self.env[p.name] = self._ival(self.sizes[p.name])
                continue
            dt = p.annotation.indices[0].id  # type: ignore[union-attr]
            data = np.array(self.inputs[p.name], np.float32)  # a copy: stores must not touch the inputs
            self.buffers[p.name] = Buf(p.name, "global", dt, data.shape, None, data)
            self.env[p.name] = self.buffers[p.name]
        for name, value in self.sizes.items():
            self.env.setdefault(name, self._ival(value))

    def _const(self, e: A.Expr) -> int:
        v = self.eval(e)
        arr = np.asarray(v)
        if arr.size != 1 and not np.all(arr == arr.flat[0]):
            raise SimulationError("expected a uniform value", e.span)
        return int(arr.flat[0])

    def _ival(self, x) -> np.ndarray:
        """An integer as a (B, T) array: a read-only broadcast, one per value and shape."""
        if np.ndim(x) != 0:
            return x
        key = (int(x), self.shape)
        arr = self.constants.get(key)
        if arr is None:
            arr = self.constants[key] = np.broadcast_to(np.asarray(x, ITYPE), self.shape)
        return arr

    def _top(self, v: np.ndarray) -> Data:
        return Data(v, np.zeros(self.shape + (LMAX,), ITYPE), np.zeros(self.shape, ITYPE))

    def _literal(self, value: float) -> Data:
        """A data literal: untagged, or a known zero (the static side's `value_zero`)."""
        d = self._top(np.full(self.shape, value, np.float32))
        if value == 0:
            d.tag[..., 0] = ZERO_MARK
        return d

    def _int_data(self, v, e: A.Expr) -> Data:
        """An integer stored as data: a literal 0 is a known zero, like the static side's."""
        if isinstance(e, A.Int) and e.value == 0:
            return self._literal(0.0)
        return self._top(np.asarray(v, np.float32))

    def _unzero(self, d: Data) -> Data:
        """`d` as an untagged value where it was a known zero (an operation that does not keep 0)."""
        return Data(d.v, np.where(is_zero(d.tag, d.arity)[..., None], 0, d.tag), d.arity, d.masked)

    # ---------------------------------------------------------------- run
    def run(self) -> SimResult:
        with np.errstate(all="ignore"):  # IEEE results (inf, nan) and wrapping integers are the model
            for s in self.k.body:
                self.stmt(s)
            self._land_copies()
        outputs = {n: np.asarray(b.data) for n, b in self.buffers.items() if b.space == "global" and b.written}
        failures = sorted(self.failures.values(), key=lambda f: (f.line, f.invariant))
        return SimResult(self.sizes, self.block_ids, self.inputs, outputs, failures, self.errors, self.probes,
                         races=self.races.report(), write_counts=dict(self.write_counts))

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Pass):
            return
        if not isinstance(s, (A.For, A.If)):
            self.current = s  # the statement whose expressions are being evaluated (for shadow records)
        if isinstance(s, A.For):
            for _ in self._loop(s):
                for b in s.body:
                    self.stmt(b)
            return
        if isinstance(s, A.If):
            if self._contains_barrier(s):  # its arms run at once, meeting at each barrier
                for _ in self._arms_at_barriers(s):
                    self.races.barrier()
                return
            cond = self._condition(s)
            outer = self.active
            for branch, mask in ((s.body, cond), (s.orelse, ~cond)):
                self.active = outer & mask
                if bool(np.any(self.active)):
                    for b in branch:
                        self.stmt(b)
            self.active = outer
            return
        if isinstance(s, A.ExprStmt):
            return self._call_stmt(s.expr, s)  # type: ignore[arg-type]
        if isinstance(s, A.Assign):
            return self._assign(s.target, s.value, s)
        if isinstance(s, A.AugAssign):
            return self._assign(s.target, self._desugared(s), s)

    def _desugared(self, s: A.AugAssign) -> A.BinOp:
        """`x op= y` as the BinOp `x op y`: one node per statement, so eval's memo of it (keyed by
        node) is reused and does not grow with every iteration."""
        entry = self.augmented.get(id(s))
        if entry is None or entry[0] is not s:
            entry = self.augmented[id(s)] = (s, A.BinOp(s.op, s.target, s.value, s.span))
        return entry[1]

    def _condition(self, s: A.If) -> np.ndarray:
        cond = self.eval(s.cond)
        return cond.v != 0 if isinstance(cond, Data) else np.asarray(cond) != 0

    def _loop(self, s: A.For):
        """Binds the loop variable to each value in turn (a generator: the body runs between)."""
        it = s.iter
        assert isinstance(it, A.Call)
        args = [self._const(a) for a in it.args]
        lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        saved = self.env.get(s.var)
        for v in range(lo, hi, step):
            self.env[s.var] = self._ival(v)
            self.loop_vars[s.var] = v
            yield v
        self.loop_vars.pop(s.var, None)
        if saved is not None:
            self.env[s.var] = saved

    # Wave specialization: the threads of a block that take different arms of an `if` run at once on
    # a GPU and meet at each barrier (the k-th barrier of one arm pairs with the k-th of the other).
    # Running one arm to its end before the other would let a consumer arm read what a producer arm
    # wrote many stages later. So an `if` with a barrier inside runs its arms as coroutines that
    # yield at each barrier; each round, every arm runs to its next barrier, then the barrier
    # happens once for all of them (the race detector's phase boundary).
    def _arms_at_barriers(self, s: A.If):
        cond = self._condition(s)
        outer = self.active
        before = self.barrier_counts.copy()
        arms = [self._barrier_block(branch, outer & mask) for branch, mask in ((s.body, cond), (s.orelse, ~cond))
                if bool(np.any(outer & mask))]
        while arms:
            arms = [arm for arm in arms if next(arm, _DONE) is not _DONE]
            self.active = outer
            if arms:
                yield
        self.active = outer
        self._check_barriers(s, self.barrier_counts - before, cond)

    def _barrier_block(self, body: tuple[A.Stmt, ...], active: np.ndarray):
        """Run `body` for `active` threads, yielding at each barrier (a coroutine of _arms_at_barriers)."""
        self.active = active
        for b in body:
            if isinstance(b, A.ExprStmt) and isinstance(b.expr, A.Call) and b.expr.func_name == "syncthreads":
                self.barrier_counts += self.active
                yield from self._suspend()
            elif isinstance(b, A.For) and self._contains_barrier(b):
                for _ in self._loop(b):
                    yield from self._barrier_block(b.body, self.active)
            elif isinstance(b, A.If) and self._contains_barrier(b):
                yield from self._arms_at_barriers(b)
            else:
                self.stmt(b)

    def _suspend(self):
        """Yield to the other arms; on return, put back this arm's threads, loop variables and
        buffers (an arm that declares `local(...)`/`shared(...)` under a name another arm also
        declares gets its own array back); masked writes of data and index names keep each arm's
        lanes, so those need nothing."""
        active, loops = self.active, dict(self.loop_vars)
        bound = {name: self.env.get(name) for name in loops}
        bound.update({name: v for name, v in self.env.items() if isinstance(v, Buf)})
        yield
        self.active = active
        self.loop_vars.clear()
        self.loop_vars.update(loops)
        for name, value in bound.items():
            if value is not None:
                self.env[name] = value

    def _contains_barrier(self, s) -> bool:
        entry = self.branch_barriers.get(id(s))
        if entry is None or entry[0] is not s:
            inside = any(isinstance(n, A.Call) and n.func_name == "syncthreads" for n in walk(s))
            entry = self.branch_barriers[id(s)] = (s, inside)
        return entry[1]

    def _check_barriers(self, s: A.If, reached: np.ndarray, cond: np.ndarray) -> None:
        """ave/barrier-divergence: the threads of a block that ran this `if` reached as many barriers
        inside it (lockstep execution ran both arms; a GPU would hang or pair the wrong barriers)."""
        act = self.active
        f = self.failures.setdefault(("ave/barrier-divergence", s.span.line),
                                     Failure("ave/barrier-divergence", s.span.line, 0, 0, {}))
        f.checked += int(act.sum())
        first = np.argmax(act, axis=1)  # each block's first thread that ran the `if`
        bad = act & (reached != reached[np.arange(self.B), first][:, None])
        n = int(bad.sum())
        if n and not f.failed:
            b, t = (int(x) for x in np.argwhere(bad)[0])
            t0 = int(first[b])
            f.first = {"block": list(self.block_ids[b]), "thread": t0, "lane": t0 % self.group,
                       "iterations": dict(self.loop_vars), "barriers": int(reached[b, t0]),
                       "other_thread": t, "other_barriers": int(reached[b, t])}
        f.failed += n
        self._probe(s, {}, extra={"barriers": np.where(act, reached, -1), "then": cond & act})

    # --------------------------------------------------------- statements
    def _call_stmt(self, e: A.Call, s) -> None:
        name = e.func_name
        if name == "syncthreads":  # lockstep execution orders the phases; the race detector counts them
            self.races.barrier()
            self.barrier_counts += self.active
            return
        if name == "async_wait":
            return self._land_copies(self._const(e.args[0]) if e.args else None)
        if name == "async_commit":
            return self._commit_copies()
        if name == "async_copy":
            return self._async_copy(e, s)
        if name == "assume":
            for a in e.args:
                if not bool(np.all(np.asarray(self.eval(a)) != 0)):
                    raise SimulationError("the sizes violate assume(...)", a.span)
            return
        if name == "tag":
            buf = self.env[e.args[0].id]  # type: ignore[union-attr]
            buf.tag_fn = (e.args[1], dict(self.env))  # type: ignore[union-attr]
            self.tag_names.setdefault(e.args[2].value, len(self.tag_names) + 1)  # type: ignore[union-attr]
            return
        if name == "reset_tags":
            buf = self.env[e.args[0].id]  # type: ignore[union-attr]
            if buf.arity is not None:  # type: ignore[union-attr]
                buf.arity = np.zeros_like(buf.arity)  # type: ignore[union-attr]
            return
        if name in ("assert_tag_eq", "assert_tag"):
            return self._assert(e, s)
        if name == "assert_mask":
            return self._assert_mask(e, s)

    def _assign(self, target: A.Expr, value: A.Expr, s) -> None:
        if isinstance(target, A.Subscript):
            buf = self.env[target.value.id]  # type: ignore[union-attr]
            v = self.eval(value)
            data = v if isinstance(v, Data) else self._int_data(v, value)
            self._store(buf, [self._index(i) for i in target.indices], data, s)  # type: ignore[arg-type]
            return
        name = target.id  # type: ignore[union-attr]
        if isinstance(value, A.Call) and value.func_name in ("shared", "local"):
            return self._alloc(name, value)
        if isinstance(value, A.Call) and value.func_name == "subview":
            return self._subview(name, value)
        if isinstance(value, A.Call) and isinstance(self.imports.get(value.func_name), LoadMatrix):
            return self._ldmatrix(name, value, s)
        if isinstance(value, A.Call) and value.func_name in self.imports:
            return self._mma(name, value, s)
        arr = self.env.get(value.args[0].id) if isinstance(value, A.Call) and value.func_name in SLOT_REDUCTIONS \
            and value.args and isinstance(value.args[0], A.Name) else None
        if isinstance(arr, Buf) and arr.space == "local" and len(arr.shape) >= 2:  # reduce_max(s, axis=a)
            return self._axis_reduce(name, value, s)
        v = self.eval(value)
        old = self.env.get(name)
        if isinstance(v, Data):
            if isinstance(old, Data):
                v = self._merge(v, old)
            self.env[name] = v
        elif isinstance(v, (np.ndarray, np.ndarray, int)) and not isinstance(v, Buf):
            v = self._ival(v)
            # with every lane active the new value is v itself (kept by eval: later reads hit its memo)
            self.env[name] = np.where(self.active, v, old) if isinstance(old, np.ndarray) and \
                old.shape == self.shape and not self.active.all() else v
        else:
            self.env[name] = v


    def _subview(self, name: str, e: A.Call) -> None:
        """A buffer over the storage of a shared buffer, from a constant element offset on: it
        shares that buffer's value and tag arrays, so every alias sees every store."""
        storage = self.env[e.args[0].id]  # type: ignore[union-attr]
        dims = e.args[2]
        shape = tuple(self._const(d) for d in (dims.elts if isinstance(dims, A.Tuple) else (dims,)))
        view = Buf(name, "shared", storage.dtype, shape, Based(row_major(*shape), self._const(e.args[1])),
                   storage.data, storage.tag, storage.arity, cosize=storage.size, storage=storage,
                   moving=moves_with(e.args[1], self.loop_deps, self.loop_vars))
        # a subview at an offset that varies is declared again in each iteration: one view per name
        storage.views = [v for v in storage.views if v.name != name] + [view]
        self.env[name] = view

    def _alloc(self, name: str, e: A.Call) -> None:
        dt = e.args[0].id  # type: ignore[union-attr]
        dims = e.args[1]
        shape = tuple(self._const(d) for d in (dims.elts if isinstance(dims, A.Tuple) else (dims,)))
        size = math.prod(shape)
        if e.func_name == "shared":
            lay_e = e.kwarg("layout")
            layout = self._shared_layout(self.eval(lay_e), shape, lay_e) if lay_e is not None else row_major(*shape)
            try:
                size = storage_size(layout, shape)
            except ValueError as exc:
                raise SimulationError(str(exc), e.span) from None
            check_shared(name, size, self.B, self.max_bytes, e.span)
            buf = Buf(name, "shared", dt, shape, layout, np.zeros((self.B, size), np.float32),
                      np.zeros((self.B, size, LMAX), ITYPE), np.zeros((self.B, size), ITYPE), cosize=size)
        else:
            init = e.kwarg("init")
            fill = float(self._scalar(init)) if init is not None else 0.0
            if dt in ROUND:  # a narrow register holds the rounded fill, as the hardware's does
                fill = float(narrow(np.asarray([fill], np.float32), dt)[0])
            buf = Buf(name, "local", dt, shape, None, np.full(self.shape + (size,), fill, np.float32),
                      np.zeros(self.shape + (size, LMAX), ITYPE), np.zeros(self.shape + (size,), ITYPE))
        self.buffers[f"{name}@{id(buf)}"] = buf
        self.env[name] = buf

    @staticmethod
    def _shared_layout(layout, shape: tuple[int, ...], e: A.Expr):
        """A shared array's `layout=` value, checked as the facts lowering checks it."""
        if not isinstance(layout, (Layout, Composed, Swizzle)):
            raise SimulationError("layout= needs a layout", e.span)
        try:
            return buffer_layout(layout, shape)
        except ValueError as exc:
            raise SimulationError(str(exc), e.span) from None

    def _scalar(self, e: A.Expr) -> float:
        if isinstance(e, A.Float):
            return e.value
        if isinstance(e, A.Int):
            return float(e.value)
        if isinstance(e, A.UnaryOp) and e.op == "-":
            return -self._scalar(e.operand)
        raise SimulationError("init= needs a number", e.span)


    def _iters(self) -> str:
        return (", " + ", ".join(f"{k}={v}" for k, v in self.loop_vars.items())) if self.loop_vars else ""


    # ------------------------------------------------------- expressions
    def _index(self, e: A.Expr) -> np.ndarray:
        v = self.eval(e)
        if isinstance(v, Data):  # a read of an index tensor (data-dependent index)
            if not bool(np.all(v.v == np.round(v.v))):
                raise SimulationError("a non-integer data value used as an index", e.span)
            return v.v.astype(ITYPE)
        return self._ival(np.asarray(v, ITYPE))

    def eval(self, e: A.Expr):
        """The value of `e` for every (block, thread). An integer expression's values are kept
        (with the env objects of its free names) and reused while those objects come back: index
        arithmetic is mostly loop-invariant or depends on inner loop variables only, a loop
        variable's value is one shared array per integer (`_ival`), and env arrays are never
        written in place. Several values per node, so `ks + 4 * v` computed in the first
        iteration of an outer loop is reused by every later one."""
        if type(e) is not A.BinOp:
            return self._eval(e)
        kept = self.kept.get(id(e))
        if kept is None or kept[0] is not e:
            kept = self.kept[id(e)] = [e, _integer_names(e), {}]
        if kept[1] is None:
            return self._eval(e)
        deps = tuple(self.env.get(n) for n in kept[1])
        key = tuple(map(id, deps))
        hit = kept[2].get(key)
        if hit is not None:
            return hit[1]
        v = self._eval(e)
        if isinstance(v, np.ndarray) and all(isinstance(d, np.ndarray) for d in deps):
            v.flags.writeable = False  # shared by later evaluations: nobody may write it in place
            self._keep(kept[2], key, deps, v)
        return v

    def _keep(self, entries: dict, key: tuple, deps: tuple, v: np.ndarray) -> None:
        """Remember one value of a node: at most _KEEP_PER_NODE values per node (the oldest goes
        first) and _KEEP_BYTES in all, so an expression of a counter that never repeats (`i += 1`)
        or of an outer loop variable costs a bounded amount of memory."""
        if entries and (len(entries) >= _KEEP_PER_NODE or self.kept_bytes + v.nbytes > _KEEP_BYTES):
            self.kept_bytes -= entries.pop(next(iter(entries)))[1].nbytes
        if self.kept_bytes + v.nbytes <= _KEEP_BYTES:
            entries[key] = (deps, v)
            self.kept_bytes += v.nbytes

    def _eval(self, e: A.Expr):
        if isinstance(e, A.Name):
            if e.id in self.env:
                v = self.env[e.id]
                return v
            if e.id in DTYPES:
                return e.id
            raise SimulationError(f"undefined name {e.id}", e.span)
        if isinstance(e, A.Int):
            if abs(e.value) >= 2**31:  # as the facts lowering refuses it (index values are 32-bit)
                raise SimulationError(f"integer literal {e.value} does not fit in 32 bits", e.span)
            return self._ival(e.value)
        if isinstance(e, A.Bool):
            return self._ival(int(e.value))
        if isinstance(e, A.Float):
            return self._literal(e.value)
        if isinstance(e, A.Subscript):
            buf = self.env[e.value.id]  # type: ignore[union-attr]
            return self.load(buf, [self._index(i) for i in e.indices], e)  # type: ignore[arg-type]
        if isinstance(e, A.BinOp):
            if e.op == "@":
                return Composed(self.eval(e.left), self.eval(e.right))
            left, right = self.eval(e.left), self.eval(e.right)
            out = self._binop(e.op, left, right)
            if e.op == "+" and isinstance(out, Data):  # integer sums (the hot path) are never butterflies
                return self._butterfly(e.op, (e.left, e.right), out, [left, right])
            return out
        if isinstance(e, A.UnaryOp):
            v = self.eval(e.operand)
            if isinstance(v, Data):  # -0 and +0 stay known zeros (as value_zero says); other operators do not
                kept = v if e.op in ("-", "+") else self._unzero(v)
                return Data(-v.v if e.op == "-" else v.v, kept.tag, kept.arity, v.masked)
            return {"-": lambda x: -x, "+": lambda x: x, "~": lambda x: ~x,
                    "not": lambda x: (x == 0).astype(ITYPE)}[e.op](v)
        if isinstance(e, A.BoolOp):
            vals = [np.asarray(self.eval(x)) != 0 for x in e.values]
            out = vals[0]
            for x in vals[1:]:
                out = (out & x) if e.op == "and" else (out | x)
            return out.astype(ITYPE)
        if isinstance(e, A.Call):
            return self._call(e)
        raise SimulationError("expression not supported by the simulator", e.span)

    def _binop(self, op: str, a, b):
        if isinstance(a, Data) or isinstance(b, Data):
            da = a if isinstance(a, Data) else self._top(np.asarray(a, np.float32))
            db = b if isinstance(b, Data) else self._top(np.asarray(b, np.float32))
            f = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "//": np.floor_divide,
                 "%": np.mod, "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
                 ">": np.greater, ">=": np.greater_equal}[op]
            return self._combine(np.asarray(f(da.v, db.v), np.float32), [da, db])
        a, b = np.asarray(a), np.asarray(b)
        f = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod,
             "^": np.bitwise_xor, "&": np.bitwise_and, "|": np.bitwise_or, "<<": np.left_shift,
             ">>": np.right_shift}
        if op in f:
            return f[op](a, b).astype(ITYPE, copy=False)
        cmp = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
               ">=": np.greater_equal}
        return cmp[op](a, b).astype(ITYPE)

    def _combine(self, v: np.ndarray, args: list[Data]) -> Data:
        """Elementwise result: the tag of the one full operand (arity > 0); with none, the first
        row statistic (arity < 0); two full operands: Top. Statistics must be the result row's
        (checked as ave/row-statistics, like the static invariant)."""
        full = [a.arity > 0 for a in args]
        stat = [a.arity < 0 for a in args]
        nfull = sum(f.astype(ITYPE) for f in full)
        tag = np.zeros(self.shape + (LMAX,), ITYPE)
        arity = np.zeros(self.shape, ITYPE)
        masked = None
        for a, f in zip(args, full):
            tag = np.where((f & (nfull == 1))[..., None], a.tag, tag)
            arity = np.where(f & (nfull == 1), a.arity, arity)
            if a.masked is not None:  # the one full operand's flow carries over
                base = masked if masked is not None else np.zeros(self.shape, bool)
                masked = np.where(f & (nfull == 1), a.masked, base)
        taken = np.zeros(self.shape, bool)
        for a, st in zip(args, stat):
            pick = st & (nfull == 0) & ~taken
            tag = np.where(pick[..., None], a.tag, tag)
            arity = np.where(pick, a.arity, arity)
            taken = taken | pick
        if self.shadow and any(bool(np.any(st)) for st in stat) and self.current is not None:
            for a, st in zip(args, stat):
                holds = ~st | (nfull > 1) | matches_row(a.tag, a.arity, tag, arity)
                self._record("ave/row-statistics", self.current, holds[..., None], a.tag[:, :, None],
                             a.arity[..., None], tag[:, :, None], arity[..., None], source="combine")
        return Data(v, tag, arity, masked)

    def _butterfly(self, op: str, nodes: tuple, out, operands: list):
        """A butterfly step `op(x, shuffle_xor(x, m))` of full values: the statistic of x's row, and
        the partner lane must hold the same row (ave/row-statistics, as on the static side)."""
        pos = butterfly_operand(op, tuple(nodes))
        if pos is None:
            return out
        own, partner = operands
        if pos == 1:
            own, partner = partner, own
        if not isinstance(own, Data) or not isinstance(partner, Data):
            return out
        full = own.arity > 0
        if not bool(np.any(full)):
            return out  # statistics: combined (and checked) as any two statistics
        drops = self._drops(nodes[1 - pos])  # shuffle_xor(x, m, drops=k): the component reduced over
        row, row_ar = reduce_rows(own.tag, own.arity, drops)
        prow, prow_ar = reduce_rows(partner.tag, partner.arity, drops)
        if self.shadow and self.current is not None:
            holds = ~full | ((prow_ar == row_ar) & np.all(prow == row, axis=-1))
            self._record("ave/row-statistics", self.current, holds[..., None], row[:, :, None], row_ar[..., None],
                         prow[:, :, None], prow_ar[..., None], source="reduce")
        return Data(out.v, np.where(full[..., None], row, out.tag), np.where(full, row_ar, out.arity), out.masked)

    def _lane_reduce(self, e: A.Call) -> Data:
        """lane_max / lane_sum over aligned groups of `width` consecutive lanes; the result's tag
        drops component `drops=` (the last by default; a statistic: negative arity), and the group
        must share the rest."""
        self._check_converged()
        d = self.eval(e.args[0])
        d = d if isinstance(d, Data) else self._top(np.asarray(d, np.float32))
        width = self._const(e.args[1])
        groups = (self.B, self.T // width, width)
        vals = np.where(self.active, d.v, -np.inf if e.func_name == "lane_max" else 0.0).reshape(groups)
        red = np.max(vals, axis=2) if e.func_name == "lane_max" else np.sum(vals, axis=2)
        v = np.repeat(red, width, axis=1)
        tag, arity = reduce_rows(d.tag, d.arity, self._drops(e))
        if self.shadow and self.current is not None:
            lead_tag = np.repeat(tag.reshape(groups + (LMAX,))[:, :, :1], width, axis=2).reshape(tag.shape)
            lead_ar = np.repeat(arity.reshape(groups)[:, :, :1], width, axis=2).reshape(arity.shape)
            holds = (arity == lead_ar) & np.all(tag == lead_tag, axis=-1)
            self._record("ave/row-statistics", self.current, holds[..., None], tag[:, :, None], arity[..., None],
                         lead_tag[:, :, None], lead_ar[..., None], source="reduce")
        return Data(v, tag, arity)

    def _slot_reduce(self, e: A.Call) -> Data:
        """reduce_max / reduce_sum over the slots of one thread's register array; the result is the
        statistic of slot 0's row, and every slot must hold that row (ave/row-statistics)."""
        buf = self.env[e.args[0].id]  # type: ignore[union-attr]
        data = np.asarray(buf.data)  # (B, T, slots)
        v = np.max(data, axis=2) if e.func_name == "reduce_max" else np.sum(data, axis=2, dtype=np.float32)
        if buf.arity is None or not self.shadow:
            return self._top(v.astype(np.float32))
        rows, row_ar = reduce_rows(np.asarray(buf.tag), np.asarray(buf.arity), self._drops(e))  # each slot's row
        if self.current is not None:
            holds = (row_ar == row_ar[..., :1]) & np.all(rows == rows[..., :1, :], axis=-1)
            self._record("ave/row-statistics", self.current, holds, rows, row_ar,
                         np.broadcast_to(rows[..., :1, :], rows.shape), np.broadcast_to(row_ar[..., :1], row_ar.shape),
                         source="slot_reduce")
        return Data(v.astype(np.float32), rows[:, :, 0], row_ar[:, :, 0])

    def _axis_reduce(self, name: str, e: A.Call, s) -> None:
        """`m = reduce_max(s, axis=a)` of a register array of rank >= 2: m has s's shape without
        axis a, each slot the reduction (and the statistic) of the slots of s along a."""
        self.current = s
        buf = self.env[e.args[0].id]  # type: ignore[union-attr]
        axis = int(self._const(e.kwarg("axis") if e.kwarg("axis") is not None else e.args[1]))
        groups = (math.prod(buf.shape[:axis]), buf.shape[axis], math.prod(buf.shape[axis + 1:]))
        data = np.asarray(buf.data).reshape(self.shape + groups)
        v = np.max(data, axis=-2) if e.func_name == "reduce_max" else np.sum(data, axis=-2, dtype=np.float32)
        v = v.reshape(self.shape + (-1,)).astype(np.float32)
        out = self.env.get(name)
        if not isinstance(out, Buf):
            shape = buf.shape[:axis] + buf.shape[axis + 1:]
            out = Buf(name, "local", buf.dtype, shape, None, np.zeros_like(v), np.zeros(v.shape + (LMAX,), ITYPE),
                      np.zeros(v.shape, ITYPE))
            self.buffers[f"{name}@{id(out)}"] = out
            self.env[name] = out
        keep = np.asarray(self.active)[..., None]
        out.data = np.where(keep, narrow(v, out.dtype) if out.dtype in ROUND else v, out.data)
        if self.shadow and buf.arity is not None:
            rows, row_ar = reduce_rows(np.asarray(buf.tag), np.asarray(buf.arity), self._drops(e))
            holds, lead, lead_ar, out_rows, out_ar = along_axis(rows, row_ar, self.shape, groups)
            self._record("ave/row-statistics", s, holds, rows, row_ar, lead, lead_ar, source="slot_reduce")
            out.tag = np.where(keep[..., None], out_rows, out.tag)
            out.arity = np.where(keep, out_ar, out.arity)

    def _drops(self, e: A.Call) -> int:
        """A reduction's `drops=`: the tag component it reduces over (default the last)."""
        given = e.kwarg("drops")
        return -1 if given is None else int(self._const(given))

    def _check_converged(self) -> None:
        """ave/lane-convergence: a warp/wave runs a lane exchange (or reduction, matrix instruction)
        with all of its lanes or with none."""
        if self.current is None or self.T % self.group or bool(np.all(self.active)):
            return  # every thread runs it (no `if` around it holds back a lane): nothing to check
        groups = self.active.reshape(self.B, self.T // self.group, self.group)
        partial = np.any(groups, axis=2) & ~np.all(groups, axis=2)
        key = ("ave/lane-convergence", self.current.span.line)
        f = self.failures.setdefault(key, Failure(key[0], key[1], 0, 0, {}))
        f.checked += int(np.any(groups, axis=2).sum())
        n = int(partial.sum())
        if n and not f.failed:
            b, grp = (int(x) for x in np.argwhere(partial)[0])
            lanes = groups[b, grp]
            f.first = {"block": list(self.block_ids[b]), "group": grp, "running": int(np.argmax(lanes)),
                       "idle": int(np.argmin(lanes)), "iterations": dict(self.loop_vars)}
        f.failed += n

    def _lane_exchange(self, e: A.Call) -> Data:
        """shuffle_xor / shuffle / readfirstlane: every thread gets the operand (value and shadow tag)
        of its source lane in the same warp/wave."""
        self._check_converged()
        d = self.eval(e.args[0])
        d = d if isinstance(d, Data) else self._top(np.asarray(d, np.float32))
        t = self.linear_tid
        first = t - t % self.group
        if e.func_name == "shuffle_xor":
            src = t ^ self._const(e.args[1])
        elif e.func_name == "shuffle":
            src = first + np.asarray(self._index(e.args[1])) % self.group
        else:
            src = first
        src = np.broadcast_to(src, self.shape)
        rows = self.block_rows
        masked = d.masked[rows, src] if d.masked is not None else None
        return Data(np.asarray(d.v)[rows, src], np.asarray(d.tag)[rows, src], np.asarray(d.arity)[rows, src], masked)

    def _call(self, e: A.Call):
        name = e.func_name
        if name == "thread_id":
            return self.tid[self._const(e.args[0])]
        if name == "block_id":
            return self.bid[self._const(e.args[0])]
        if name == "lane_id":
            return self.linear_tid % self.group
        if name in ("wave_id", "warp_id"):
            return self.linear_tid // self.group
        if name in ("min", "max"):
            a, b = self.eval(e.args[0]), self.eval(e.args[1])
            if isinstance(a, Data) or isinstance(b, Data):
                da = a if isinstance(a, Data) else self._top(np.asarray(a, np.float32))
                db = b if isinstance(b, Data) else self._top(np.asarray(b, np.float32))
                return self._combine((np.minimum if name == "min" else np.maximum)(da.v, db.v), [da, db])
            return (np.minimum if name == "min" else np.maximum)(np.asarray(a), np.asarray(b))
        if name in ("row_major", "col_major"):
            dims = [self._const(a) for a in e.args]
            return row_major(*dims) if name == "row_major" else col_major(*dims)
        if name == "layout":
            return Layout(self._nested(e.args[0]), self._nested(e.args[1]))
        if name == "swizzle":
            return Swizzle(*(self._const(a) for a in e.args))
        unary = {"exp2": np.exp2, "exp": np.exp, "abs": np.abs, "sqrt": np.sqrt,
                 "rsqrt": lambda x: 1.0 / np.sqrt(x)}
        if name in unary:
            d = self.eval(e.args[0])
            d = self._unzero(d) if isinstance(d, Data) else self._top(np.asarray(d, np.float32))
            return Data(unary[name](d.v), d.tag, d.arity, d.masked)
        if name == "cast":
            d = self.eval(e.args[0])
            d = d if isinstance(d, Data) else self._top(np.asarray(d, np.float32))
            dt = e.args[1].id  # type: ignore[union-attr]
            v = np.asarray(narrow(np.asarray(d.v), dt)) if dt in ROUND else d.v
            return Data(v, d.tag, d.arity, d.masked)
        if name in ("lane_max", "lane_sum"):
            return self._lane_reduce(e)
        if name in ("shuffle_xor", "shuffle", "readfirstlane"):
            return self._lane_exchange(e)
        if name in ("reduce_max", "reduce_sum"):
            return self._slot_reduce(e)
        if name in ("select", "fmax", "fmin"):
            args = [self.eval(a) for a in e.args]
            ds = [a if isinstance(a, Data) else self._top(np.asarray(a, np.float32)) for a in args]
            if name == "select":
                out = self._combine(np.where(ds[0].v != 0, ds[1].v, ds[2].v), ds[1:])
                if not isinstance(args[0], Data):  # an index condition: the tagged branch not taken masks
                    take = ds[0].v != 0
                    then_tagged, else_tagged = ds[1].arity > 0, ds[2].arity > 0
                    off = (then_tagged & ~else_tagged & ~take) | (else_tagged & ~then_tagged & take)
                    out.masked = masked_of(out) | off
                return out
            out = self._combine((np.maximum if name == "fmax" else np.minimum)(ds[0].v, ds[1].v), ds)
            return self._butterfly(name, e.args, out, ds)
        raise SimulationError(f"{name}() is not supported by the simulator", e.span)

    def _nested(self, e: A.Expr):
        if isinstance(e, A.Tuple):
            return tuple(self._nested(x) for x in e.elts)
        return self._const(e)

    # -------------------------------------------------------- assertions
    def _operand(self, e: A.Expr):
        """A data value, or a whole register array as (B, T, n) arrays."""
        if isinstance(e, A.Name) and isinstance(self.env.get(e.id), Buf):
            buf = self.env[e.id]
            return buf.data, buf.tag, buf.arity
        d = self.eval(e)
        return d.v[..., None], d.tag[..., None, :], d.arity[..., None]


    # --------------------------------------------------- matrix instructions
    def _ldmatrix(self, name: str, e: A.Call, s) -> None:
        """Every lane supplies a row address; slot v of lane l gets element (row, col) of matrix
        v // 2 from the row that lane 8 * (v // 2) + row supplied (instructions.LoadMatrix)."""
        lm = self.imports[e.func_name]
        src = e.args[0]
        buf, dst = self.env[src.value.id], self.env[name]  # type: ignore[union-attr]
        idx = [np.broadcast_to(np.asarray(self._index(i)), (self.B, self.T)) for i in src.indices]  # type: ignore[union-attr]
        t = np.arange(self.T)
        lane, base = t % 32, t - t % 32
        for v in range(2 * lm.matrices):
            h = v % 2
            srow = lane // 4 if not lm.trans else 2 * (lane % 4) + h
            scol = 2 * (lane % 4) + h if not lm.trans else lane // 4
            provider = base + 8 * (v // 2) + srow
            coords = [np.asarray(x[:, provider]) for x in idx[:-1]] + [np.asarray(idx[-1][:, provider] + scol[None, :])]
            d = self.load(buf, coords, src)
            self._store(dst, [self._ival(v)], d, s)

    def _mma(self, name: str, e: A.Call, s) -> None:
        instr = self.imports[e.func_name]  # type: ignore[index]
        self.current = s
        self._check_converged()
        a, b, c = (self.env[x.id] for x in e.args)  # type: ignore[union-attr]
        g = instr.group_size
        if self.T % g:
            raise SimulationError(f"{instr.name} needs whole {instr.group}s: the block has {self.T} threads", e.span)
        act = np.asarray(self.active).reshape(self.B, self.T // g, g)
        if not (act.all(axis=-1) | ~act.any(axis=-1)).all():
            raise SimulationError(f"{instr.name} under divergent control flow inside a {instr.group}", e.span)
        W = self.T // g
        ar, ac = slot_maps(instr.a, g)
        br, bc = slot_maps(instr.b, g)
        cr, cc = slot_maps(instr.c, g)
        av = a.data.reshape(self.B, W, g, -1)
        bv = b.data.reshape(self.B, W, g, -1)
        cv = c.data.reshape(self.B, W, g, -1)
        amat = _scatter_matrix(av, ar * instr.k + ac, (self.B, W, instr.m, instr.k))
        bmat = _scatter_matrix(bv, br * instr.n + bc, (self.B, W, instr.k, instr.n))
        cells = (cr * instr.n + cc).reshape(-1)  # (lane, value) -> row * n + col of the accumulator
        dmat = np.einsum("bwik,bwkj->bwij", amat, bmat).reshape(self.B, W, -1)
        d = (np.take(dmat, cells, axis=2) + cv.reshape(self.B, W, -1)).reshape(self.B, self.T, -1)
        out = self.env.get(name)
        if not isinstance(out, Buf):
            out = Buf(name, "local", instr.acc_dtype, (instr.c.values,), None, d,
                      np.zeros(self.shape + (instr.c.values, LMAX), ITYPE),
                      np.zeros(self.shape + (instr.c.values,), ITYPE))
            self.buffers[f"{name}@{id(out)}"] = out
            self.env[name] = out
        keep = np.asarray(self.active)[..., None]
        if out.dtype in ROUND:  # an existing narrow array receiving the f32 result rounds it
            d = narrow(np.asarray(d, np.float32), out.dtype)
        out.data = d if keep.all() else np.where(keep, d, out.data)
        if self.shadow:
            self._mma_shadow(instr, a, b, c, out, keep, s, (ar, ac, br, bc, cr, cc), W)


# -------------------------------------------------------------------- reference


def _scatter_matrix(values: np.ndarray, cells: np.ndarray, shape: tuple[int, int, int, int]) -> np.ndarray:
    """A matrix operand of every wave from its (B, W, lane, value) registers: `cells` gives each
    (lane, value)'s row * cols + col; elements no register holds are 0. When every element is held
    by exactly one register (the usual operand map), the same matrix is one gather through the
    inverse map, about twice as fast as zero-filling and scattering."""
    flat, size = cells.reshape(-1), shape[2] * shape[3]
    if flat.size == size:
        inverse = np.full(size, -1, np.intp)
        inverse[flat] = np.arange(size)
        if bool((inverse >= 0).all()):  # size cells all covered by size registers: a permutation
            regs = np.asarray(values, np.float32).reshape(shape[0], shape[1], -1)
            return np.take(regs, inverse, axis=2).reshape(shape)
    out = np.zeros((shape[0], shape[1], size), np.float32)
    out[:, :, cells.reshape(-1)] = values.reshape(shape[0], shape[1], -1)
    return out.reshape(shape)


_THREAD_CALLS = {"thread_id", "block_id", "lane_id", "wave_id", "warp_id"}


def _integer_names(e: A.Expr) -> tuple[str, ...] | None:
    """The free names of an expression built only of names, integer literals, integer operators
    and thread-id calls (its value depends on nothing else), or None for any other expression."""
    names: set[str] = set()

    def pure(x: A.Expr) -> bool:
        if isinstance(x, A.Name):
            names.add(x.id)
            return True
        if isinstance(x, (A.Int, A.Bool)):
            return True
        if isinstance(x, A.BinOp):
            return x.op not in ("@", "/") and pure(x.left) and pure(x.right)
        if isinstance(x, A.UnaryOp):
            return pure(x.operand)
        if isinstance(x, A.BoolOp):
            return all(pure(v) for v in x.values)
        if isinstance(x, A.Call):
            return x.func_name in _THREAD_CALLS and not x.kwargs and all(isinstance(a, A.Int) for a in x.args)
        return False

    return tuple(sorted(names)) if pure(e) else None
