"""The concrete simulator: ground truth for the verifier.

An interpreter of the AST (independent of the lowering in `facts/`, so a lowering bug is not replicated
here), vectorised with JAX over all threads of all simulated blocks: every value is an array of
shape (blocks, threads); loops run in order; `if` runs both branches under masks; statements
execute in lockstep, so barriers order phases by construction. Matrix instructions gather their
operands across the lanes of each wave/warp with the instruction library's maps.

Shadow mode carries, for every data value, the tag of its tagged source (the tag function at the
source coordinates) and checks every tag assertion and every matrix instruction's K pairing for
every block, thread, iteration and value: the exhaustive ground truth for the given sizes.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..hw.dtypes import DTYPES
from ..hw.instructions import Instruction, LoadMatrix
from ..hw.layout import Composed, Layout, Swizzle, col_major, row_major
from ..lang import ast as A
from .inputs import random_inputs, tensor_dims, tensor_shape
from .limits import check_memory, check_size_values
from .memory import MemoryModel
from .race_detector import RaceDetector
from .shadow import ShadowChecks
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
        self.failures: dict[tuple[str, int], Failure] = {}
        self.errors: list[str] = []
        self.probes: list[dict] = []
        self.tag_names: dict[str, int] = {}
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
        self.active = jnp.ones(self.shape, bool)
        self.races = RaceDetector(self.B, self.T, np.arange(self.T) // ordered)
        self.write_counts: dict[str, np.ndarray] = {}
        self.pending: list[tuple] = []  # async copies in flight: (buffer, index, data, stmt, issuing threads, group)
        self.committed = jnp.zeros(self.shape, ITYPE)  # copy groups each thread has committed (async_commit)
        bids = np.array(self.block_ids, dtype=np.int32).reshape(self.B, len(self.grid))
        self.bid = [jnp.broadcast_to(jnp.asarray(bids[:, d])[:, None], self.shape) for d in range(len(self.grid))]
        lin = np.arange(self.T)
        self.tid = []
        for extent in self.block:
            self.tid.append(jnp.broadcast_to(jnp.asarray(lin % extent, ITYPE)[None, :], self.shape))
            lin = lin // extent
        self.linear_tid = jnp.broadcast_to(jnp.arange(self.T, dtype=ITYPE)[None, :], self.shape)
        self.env = {}
        self.inputs = random_inputs(self.k, self.sizes, self.seed, self.index_entries)
        for p in self.k.params:
            if not isinstance(p.annotation, A.Subscript):
                self.env[p.name] = self._ival(self.sizes[p.name])
                continue
            dt = p.annotation.indices[0].id  # type: ignore[union-attr]
            self.buffers[p.name] = Buf(p.name, "global", dt, self.inputs[p.name].shape, None,
                                       jnp.asarray(self.inputs[p.name]))
            self.env[p.name] = self.buffers[p.name]
        for name, value in self.sizes.items():
            self.env.setdefault(name, self._ival(value))

    def _const(self, e: A.Expr) -> int:
        v = self.eval(e)
        arr = np.asarray(v)
        if arr.size != 1 and not np.all(arr == arr.flat[0]):
            raise SimulationError("expected a uniform value", e.span)
        return int(arr.flat[0])

    def _ival(self, x) -> jnp.ndarray:
        return jnp.broadcast_to(jnp.asarray(x, ITYPE), self.shape) if np.ndim(x) == 0 else x

    def _top(self, v: jnp.ndarray) -> Data:
        return Data(v, jnp.zeros(self.shape + (LMAX,), ITYPE), jnp.zeros(self.shape, ITYPE))

    def _literal(self, value: float) -> Data:
        """A data literal: untagged, or a known zero (the static side's `value_zero`)."""
        d = self._top(jnp.full(self.shape, value, jnp.float32))
        if value == 0:
            d.tag = d.tag.at[..., 0].set(ZERO_MARK)
        return d

    def _int_data(self, v, e: A.Expr) -> Data:
        """An integer stored as data: a literal 0 is a known zero, like the static side's."""
        if isinstance(e, A.Int) and e.value == 0:
            return self._literal(0.0)
        return self._top(jnp.asarray(v, jnp.float32))

    def _unzero(self, d: Data) -> Data:
        """`d` as an untagged value where it was a known zero (an operation that does not keep 0)."""
        return Data(d.v, jnp.where(is_zero(d.tag, d.arity)[..., None], 0, d.tag), d.arity, d.masked)

    # ---------------------------------------------------------------- run
    def run(self) -> SimResult:
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
            it = s.iter
            assert isinstance(it, A.Call)
            args = [self._const(a) for a in it.args]
            lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
            saved = self.env.get(s.var)
            for v in range(lo, hi, step):
                self.env[s.var] = self._ival(v)
                self.loop_vars[s.var] = v
                for b in s.body:
                    self.stmt(b)
            self.loop_vars.pop(s.var, None)
            if saved is not None:
                self.env[s.var] = saved
            return
        if isinstance(s, A.If):
            cond = self.eval(s.cond)
            cond = cond.v != 0 if isinstance(cond, Data) else jnp.asarray(cond) != 0
            outer = self.active
            for branch, mask in ((s.body, cond), (s.orelse, ~cond)):
                self.active = outer & mask
                if bool(jnp.any(self.active)):
                    for b in branch:
                        self.stmt(b)
            self.active = outer
            return
        if isinstance(s, A.ExprStmt):
            return self._call_stmt(s.expr, s)  # type: ignore[arg-type]
        if isinstance(s, A.Assign):
            return self._assign(s.target, s.value, s)
        if isinstance(s, A.AugAssign):
            return self._assign(s.target, A.BinOp(s.op, s.target, s.value, s.span), s)

    # --------------------------------------------------------- statements
    def _call_stmt(self, e: A.Call, s) -> None:
        name = e.func_name
        if name == "syncthreads":  # lockstep execution orders the phases; the race detector counts them
            self.races.barrier()
            return
        if name == "async_wait":
            return self._land_copies(self._const(e.args[0]) if e.args else None)
        if name == "async_commit":
            return self._commit_copies()
        if name == "async_copy":
            return self._async_copy(e, s)
        if name == "assume":
            for a in e.args:
                if not bool(jnp.all(jnp.asarray(self.eval(a)) != 0)):
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
                buf.arity = jnp.zeros_like(buf.arity)  # type: ignore[union-attr]
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
        if isinstance(value, A.Call) and isinstance(self.imports.get(value.func_name), LoadMatrix):
            return self._ldmatrix(name, value, s)
        if isinstance(value, A.Call) and value.func_name in self.imports:
            return self._mma(name, value, s)
        v = self.eval(value)
        old = self.env.get(name)
        if isinstance(v, Data):
            if isinstance(old, Data):
                v = self._merge(v, old)
            self.env[name] = v
        elif isinstance(v, (jnp.ndarray, np.ndarray, int)) and not isinstance(v, Buf):
            v = self._ival(v)
            self.env[name] = jnp.where(self.active, v, old) if isinstance(old, jnp.ndarray) and \
                old.shape == self.shape else v
        else:
            self.env[name] = v




    def _alloc(self, name: str, e: A.Call) -> None:
        dt = e.args[0].id  # type: ignore[union-attr]
        dims = e.args[1]
        shape = tuple(self._const(d) for d in (dims.elts if isinstance(dims, A.Tuple) else (dims,)))
        size = math.prod(shape)
        if e.func_name == "shared":
            lay_e = e.kwarg("layout")
            layout = self.eval(lay_e) if lay_e is not None else row_major(*shape)
            if isinstance(layout, Layout) and layout.rank == 1 and len(shape) > 1:
                layout = Composed(layout, row_major(*shape))
            buf = Buf(name, "shared", dt, shape, layout, jnp.zeros((self.B, size), jnp.float32),
                      jnp.zeros((self.B, size, LMAX), ITYPE), jnp.zeros((self.B, size), ITYPE))
        else:
            init = e.kwarg("init")
            fill = float(self._scalar(init)) if init is not None else 0.0
            buf = Buf(name, "local", dt, shape, None, jnp.full(self.shape + (size,), fill, jnp.float32),
                      jnp.zeros(self.shape + (size, LMAX), ITYPE), jnp.zeros(self.shape + (size,), ITYPE))
        self.buffers[f"{name}@{id(buf)}"] = buf
        self.env[name] = buf

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
    def _index(self, e: A.Expr) -> jnp.ndarray:
        v = self.eval(e)
        if isinstance(v, Data):  # a read of an index tensor (data-dependent index)
            if not bool(jnp.all(v.v == jnp.round(v.v))):
                raise SimulationError("a non-integer data value used as an index", e.span)
            return v.v.astype(ITYPE)
        return self._ival(jnp.asarray(v, ITYPE))

    def eval(self, e: A.Expr):
        if isinstance(e, A.Name):
            if e.id in self.env:
                v = self.env[e.id]
                return v
            if e.id in DTYPES:
                return e.id
            raise SimulationError(f"undefined name {e.id}", e.span)
        if isinstance(e, A.Int):
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
            return self._binop(e.op, self.eval(e.left), self.eval(e.right))
        if isinstance(e, A.UnaryOp):
            v = self.eval(e.operand)
            if isinstance(v, Data):  # -0 and +0 stay known zeros (as value_zero says); other operators do not
                kept = v if e.op in ("-", "+") else self._unzero(v)
                return Data(-v.v if e.op == "-" else v.v, kept.tag, kept.arity, v.masked)
            return {"-": lambda x: -x, "+": lambda x: x, "~": lambda x: ~x,
                    "not": lambda x: (x == 0).astype(ITYPE)}[e.op](v)
        if isinstance(e, A.BoolOp):
            vals = [jnp.asarray(self.eval(x)) != 0 for x in e.values]
            out = vals[0]
            for x in vals[1:]:
                out = (out & x) if e.op == "and" else (out | x)
            return out.astype(ITYPE)
        if isinstance(e, A.Call):
            return self._call(e)
        raise SimulationError("expression not supported by the simulator", e.span)

    def _binop(self, op: str, a, b):
        if isinstance(a, Data) or isinstance(b, Data):
            da = a if isinstance(a, Data) else self._top(jnp.asarray(a, jnp.float32))
            db = b if isinstance(b, Data) else self._top(jnp.asarray(b, jnp.float32))
            f = {"+": jnp.add, "-": jnp.subtract, "*": jnp.multiply, "/": jnp.divide, "//": jnp.floor_divide,
                 "%": jnp.mod, "==": jnp.equal, "!=": jnp.not_equal, "<": jnp.less, "<=": jnp.less_equal,
                 ">": jnp.greater, ">=": jnp.greater_equal}[op]
            return self._combine(jnp.asarray(f(da.v, db.v), jnp.float32), [da, db])
        a, b = jnp.asarray(a), jnp.asarray(b)
        f = {"+": jnp.add, "-": jnp.subtract, "*": jnp.multiply, "//": jnp.floor_divide, "%": jnp.mod,
             "^": jnp.bitwise_xor, "&": jnp.bitwise_and, "|": jnp.bitwise_or, "<<": jnp.left_shift,
             ">>": jnp.right_shift}
        if op in f:
            return f[op](a, b).astype(ITYPE)
        cmp = {"==": jnp.equal, "!=": jnp.not_equal, "<": jnp.less, "<=": jnp.less_equal, ">": jnp.greater,
               ">=": jnp.greater_equal}
        return cmp[op](a, b).astype(ITYPE)

    def _combine(self, v: jnp.ndarray, args: list[Data]) -> Data:
        """Elementwise result: the tag of the one full operand (arity > 0); with none, the first
        row statistic (arity < 0); two full operands: Top. Statistics must be the result row's
        (checked as ave/row-statistics, like the static invariant)."""
        full = [a.arity > 0 for a in args]
        stat = [a.arity < 0 for a in args]
        nfull = sum(f.astype(ITYPE) for f in full)
        tag = jnp.zeros(self.shape + (LMAX,), ITYPE)
        arity = jnp.zeros(self.shape, ITYPE)
        masked = None
        for a, f in zip(args, full):
            tag = jnp.where((f & (nfull == 1))[..., None], a.tag, tag)
            arity = jnp.where(f & (nfull == 1), a.arity, arity)
            if a.masked is not None:  # the one full operand's flow carries over
                base = masked if masked is not None else jnp.zeros(self.shape, bool)
                masked = jnp.where(f & (nfull == 1), a.masked, base)
        taken = jnp.zeros(self.shape, bool)
        for a, st in zip(args, stat):
            pick = st & (nfull == 0) & ~taken
            tag = jnp.where(pick[..., None], a.tag, tag)
            arity = jnp.where(pick, a.arity, arity)
            taken = taken | pick
        if self.shadow and any(bool(jnp.any(st)) for st in stat) and self.current is not None:
            idx = jnp.arange(LMAX)
            for a, st in zip(args, stat):
                n = -a.arity
                prefix = jnp.all(jnp.where(idx < n[..., None], a.tag == tag, True), axis=-1)
                longer = jnp.where(nfull == 1, jnp.abs(arity) > n, jnp.abs(arity) == n)
                holds = ~st | (nfull > 1) | (longer & prefix)
                self._record("ave/row-statistics", self.current, holds[..., None], a.tag[:, :, None],
                             a.arity[..., None], tag[:, :, None], arity[..., None], source="combine")
        return Data(v, tag, arity, masked)

    def _lane_reduce(self, e: A.Call) -> Data:
        """lane_max / lane_sum over aligned groups of `width` consecutive lanes; the result's tag
        drops the last component (a statistic: negative arity), and the group must share the rest."""
        d = self.eval(e.args[0])
        d = d if isinstance(d, Data) else self._top(jnp.asarray(d, jnp.float32))
        width = self._const(e.args[1])
        groups = (self.B, self.T // width, width)
        vals = jnp.where(self.active, d.v, -jnp.inf if e.func_name == "lane_max" else 0.0).reshape(groups)
        red = jnp.max(vals, axis=2) if e.func_name == "lane_max" else jnp.sum(vals, axis=2)
        v = jnp.repeat(red, width, axis=1)
        n = jnp.abs(d.arity)
        idx = jnp.arange(LMAX)
        keep = idx < (n - 1)[..., None]
        tag = jnp.where(keep, d.tag, 0)
        arity = jnp.where(n > 0, -(n - 1), 0)
        if self.shadow and self.current is not None:
            lead_tag = jnp.repeat(tag.reshape(groups + (LMAX,))[:, :, :1], width, axis=2).reshape(tag.shape)
            lead_ar = jnp.repeat(arity.reshape(groups)[:, :, :1], width, axis=2).reshape(arity.shape)
            holds = (arity == lead_ar) & jnp.all(tag == lead_tag, axis=-1)
            self._record("ave/row-statistics", self.current, holds[..., None], tag[:, :, None], arity[..., None],
                         lead_tag[:, :, None], lead_ar[..., None], source="reduce")
        return Data(v, tag, arity)

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
                da = a if isinstance(a, Data) else self._top(jnp.asarray(a, jnp.float32))
                db = b if isinstance(b, Data) else self._top(jnp.asarray(b, jnp.float32))
                return self._combine((jnp.minimum if name == "min" else jnp.maximum)(da.v, db.v), [da, db])
            return (jnp.minimum if name == "min" else jnp.maximum)(jnp.asarray(a), jnp.asarray(b))
        if name in ("row_major", "col_major"):
            dims = [self._const(a) for a in e.args]
            return row_major(*dims) if name == "row_major" else col_major(*dims)
        if name == "layout":
            return Layout(self._nested(e.args[0]), self._nested(e.args[1]))
        if name == "swizzle":
            return Swizzle(*(self._const(a) for a in e.args))
        unary = {"exp2": jnp.exp2, "exp": jnp.exp, "abs": jnp.abs, "sqrt": jnp.sqrt,
                 "rsqrt": lambda x: 1.0 / jnp.sqrt(x)}
        if name in unary:
            d = self.eval(e.args[0])
            d = self._unzero(d) if isinstance(d, Data) else self._top(jnp.asarray(d, jnp.float32))
            return Data(unary[name](d.v), d.tag, d.arity, d.masked)
        if name == "cast":
            d = self.eval(e.args[0])
            d = d if isinstance(d, Data) else self._top(jnp.asarray(d, jnp.float32))
            dt = e.args[1].id  # type: ignore[union-attr]
            v = jnp.asarray(narrow(np.asarray(d.v), dt)) if dt in ROUND else d.v
            return Data(v, d.tag, d.arity, d.masked)
        if name in ("lane_max", "lane_sum"):
            return self._lane_reduce(e)
        if name in ("select", "fmax", "fmin"):
            args = [self.eval(a) for a in e.args]
            ds = [a if isinstance(a, Data) else self._top(jnp.asarray(a, jnp.float32)) for a in args]
            if name == "select":
                out = self._combine(jnp.where(ds[0].v != 0, ds[1].v, ds[2].v), ds[1:])
                if not isinstance(args[0], Data):  # an index condition: the tagged branch not taken masks
                    take = ds[0].v != 0
                    then_tagged, else_tagged = ds[1].arity > 0, ds[2].arity > 0
                    off = (then_tagged & ~else_tagged & ~take) | (else_tagged & ~then_tagged & take)
                    out.masked = masked_of(out) | off
                return out
            return self._combine((jnp.maximum if name == "fmax" else jnp.minimum)(ds[0].v, ds[1].v), ds)
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
            coords = [jnp.asarray(x[:, provider]) for x in idx[:-1]] + [jnp.asarray(idx[-1][:, provider] + scol[None, :])]
            d = self.load(buf, coords, src)
            self._store(dst, [self._ival(v)], d, s)

    def _mma(self, name: str, e: A.Call, s) -> None:
        instr = self.imports[e.func_name]  # type: ignore[index]
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
        amat = jnp.zeros((self.B, W, instr.m, instr.k), jnp.float32).at[:, :, ar, ac].set(av)
        bmat = jnp.zeros((self.B, W, instr.k, instr.n), jnp.float32).at[:, :, br, bc].set(bv)
        cmat = jnp.zeros((self.B, W, instr.m, instr.n), jnp.float32).at[:, :, cr, cc].set(cv)
        dmat = jnp.einsum("bwik,bwkj->bwij", amat, bmat) + cmat
        d = dmat[:, :, cr, cc].reshape(self.B, self.T, -1)
        out = self.env.get(name)
        if not isinstance(out, Buf):
            out = Buf(name, "local", instr.acc_dtype, (instr.c.values,), None, d,
                      jnp.zeros(self.shape + (instr.c.values, LMAX), ITYPE),
                      jnp.zeros(self.shape + (instr.c.values,), ITYPE))
            self.buffers[f"{name}@{id(out)}"] = out
            self.env[name] = out
        keep = np.asarray(self.active)[..., None]
        out.data = jnp.where(keep, d, out.data)
        if self.shadow:
            self._mma_shadow(instr, a, b, c, out, keep, s, (ar, ac, br, bc, cr, cc), W)













# -------------------------------------------------------------------- reference
















