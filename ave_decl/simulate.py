"""The concrete simulator: ground truth for the verifier.

An interpreter of the AST (independent of `lower.py`, so a lowering bug is not replicated
here), vectorised with JAX over all threads of all simulated blocks: every value is an array of
shape (blocks, threads); loops run in order; `if` runs both branches under masks; statements
execute in lockstep, so barriers order phases by construction. Matrix instructions gather their
operands across the lanes of each wave/warp with the instruction library's maps.

Shadow mode carries, for every data value, the tag of its tagged source (the tag function at the
source coordinates) and checks every tag assertion and every matrix instruction's K pairing for
every block, thread, iteration and value: the exhaustive ground truth for the given sizes.
"""
from __future__ import annotations

import ast as pyast
import math
from dataclasses import dataclass, field
from functools import lru_cache

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from . import ast as A
from .errors import FrontEndError
from .instructions import Instruction, LoadMatrix, OperandMap
from .layout import AnyLayout, Composed, Layout, Swizzle, col_major, row_major
from .lower import DTYPES, resolve_imports
from .race_detector import RaceDetector
from .source import SourceFile

LMAX = 6  # tag components carried per element
_ITYPE = jnp.int32

_ROUND = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "fp8": ml_dtypes.float8_e4m3fnuz,
          "bf8": ml_dtypes.float8_e5m2fnuz}


class SimulationError(FrontEndError):
    """The kernel cannot be simulated at these sizes (bad sizes, divergence the model cannot run)."""

    kind = "simulation"


@dataclass
class Data:
    """A data value of every (block, thread), with its shadow tag (arity 0 = Top)."""

    v: jnp.ndarray  # (B, T) float32
    tag: jnp.ndarray  # (B, T, LMAX) int32
    arity: jnp.ndarray  # (B, T) int32


@dataclass
class Buf:
    name: str
    space: str
    dtype: str
    shape: tuple[int, ...]
    layout: AnyLayout | None
    data: jnp.ndarray  # global: shape; shared: (B, size); local: (B, T, size)
    tag: jnp.ndarray | None = None  # shared/local shadow: data.shape + (LMAX,)
    arity: jnp.ndarray | None = None
    tag_fn: tuple | None = None  # (lambda, captured env) of a tag binding
    written: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class Failure:
    """One assertion site's shadow-check result: how many checks failed and the first failing one."""

    invariant: str
    line: int
    failed: int
    checked: int
    first: dict
    classes: dict = field(default_factory=dict)  # the failing lanes / value slots (sorted), for comparison


@dataclass
class SimResult:
    sizes: dict[str, int]
    blocks: list[tuple[int, ...]]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    failures: list[Failure] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    reference: dict | None = None
    races: list[dict] = field(default_factory=list)  # race_detector.RaceDetector.report()
    write_counts: dict[str, np.ndarray] = field(default_factory=dict)  # global output -> stores per element

    @property
    def shadow_ok(self) -> bool:
        return not any(f.failed for f in self.failures)


class Simulator:
    def __init__(self, kernel: A.Kernel, imports: dict[str, Instruction], sizes: dict[str, int],
                 blocks: list[tuple[int, ...]] | None = None, seed: int = 0, shadow: bool = True,
                 probe: dict | None = None, async_land: str = "wait",
                 index_entries: dict[str, list[list[int]]] | None = None):
        self.k = kernel
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
        self.shape = (1, 1)  # launch extents are evaluated over sizes only
        self.env = {name: self._ival(value) for name, value in self.sizes.items()}
        self.grid = tuple(self._const(e) for e in _elts(dec.kwarg("grid")))
        self.block = tuple(self._const(e) for e in _elts(dec.kwarg("block")))
        group = dec.kwarg("wave") or dec.kwarg("warp")
        self.group = self._const(group) if group is not None else 64
        # the unit that executes shared-memory operations in order: a wave (AMD), a thread (NVIDIA)
        ordered = self.group if dec.kwarg("warp") is None else 1
        all_blocks = list(np.ndindex(*self.grid))
        # a requested block may carry trailing zeros (reports give 3 dimensions): keep the grid's rank
        self.block_ids = [tuple(b)[:len(self.grid)] for b in (blocks if blocks is not None else all_blocks)]
        for b in self.block_ids:
            if b not in set(all_blocks):
                raise SimulationError(f"block {b} is outside the grid {self.grid}", dec.span)
        self.B, self.T = len(self.block_ids), math.prod(self.block)
        self.shape = (self.B, self.T)
        self.active = jnp.ones(self.shape, bool)
        self.races = RaceDetector(self.B, self.T, np.arange(self.T) // ordered)
        self.write_counts: dict[str, np.ndarray] = {}
        self.pending: list[tuple] = []  # async copies in flight: (buffer, index, data, stmt, issuing threads)
        bids = np.array(self.block_ids, dtype=np.int32).reshape(self.B, len(self.grid))
        self.bid = [jnp.broadcast_to(jnp.asarray(bids[:, d])[:, None], self.shape) for d in range(len(self.grid))]
        lin = np.arange(self.T)
        self.tid = []
        for extent in self.block:
            self.tid.append(jnp.broadcast_to(jnp.asarray(lin % extent, _ITYPE)[None, :], self.shape))
            lin = lin // extent
        self.linear_tid = jnp.broadcast_to(jnp.arange(self.T, dtype=_ITYPE)[None, :], self.shape)
        self.env = {}
        rng = np.random.default_rng(self.seed)
        self.inputs: dict[str, np.ndarray] = {}
        for p in self.k.params:
            if not isinstance(p.annotation, A.Subscript):
                self.env[p.name] = self._ival(self.sizes[p.name])
                continue
            dt = p.annotation.indices[0].id  # type: ignore[union-attr]
            shape = tensor_shape(p, self.sizes)
            values = rng.standard_normal(shape).astype(np.float32)
            if len(p.annotation.indices) == 3:  # an index tensor: a permutation or values in [lo, hi)
                values = self._index_input(p.annotation.indices[2], shape, rng)
                values = _with_entries(values, self.index_entries.get(p.name, []),
                                       permutation=isinstance(p.annotation.indices[2], A.Name))
            if dt in _ROUND:
                values = values.astype(_ROUND[dt]).astype(np.float32)
            self.inputs[p.name] = values
            self.buffers[p.name] = Buf(p.name, "global", dt, shape, None, jnp.asarray(values))
            self.env[p.name] = self.buffers[p.name]
        for name, value in self.sizes.items():
            self.env.setdefault(name, self._ival(value))

    def _index_input(self, e: A.Expr, shape: tuple[int, ...], rng) -> np.ndarray:
        if isinstance(e, A.Name) and e.id == "permutation":
            return rng.permutation(math.prod(shape)).reshape(shape).astype(np.float32)
        saved, self.env = self.env, {n: self._ival(v) for n, v in self.sizes.items()}
        lo, hi = (self._const(x) for x in e.elts)  # type: ignore[union-attr]
        self.env = saved
        return rng.integers(lo, hi, size=shape).astype(np.float32)

    def _const(self, e: A.Expr) -> int:
        v = self.eval(e)
        arr = np.asarray(v)
        if arr.size != 1 and not np.all(arr == arr.flat[0]):
            raise SimulationError("expected a uniform value", e.span)
        return int(arr.flat[0])

    def _ival(self, x) -> jnp.ndarray:
        return jnp.broadcast_to(jnp.asarray(x, _ITYPE), self.shape) if np.ndim(x) == 0 else x

    def _top(self, v: jnp.ndarray) -> Data:
        return Data(v, jnp.zeros(self.shape + (LMAX,), _ITYPE), jnp.zeros(self.shape, _ITYPE))

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
            return self._land_copies()
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

    def _assign(self, target: A.Expr, value: A.Expr, s) -> None:
        if isinstance(target, A.Subscript):
            buf = self.env[target.value.id]  # type: ignore[union-attr]
            v = self.eval(value)
            data = v if isinstance(v, Data) else self._top(jnp.asarray(v, jnp.float32))
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

    def _async_copy(self, e: A.Call, s) -> None:
        """Read the source now; the data lands in shared memory at the issuing threads' next
        `async_wait()` (the latest moment the hardware may deliver it), so a read before the wait
        sees the old contents and is recorded as an ASYNC race."""
        dst, src = e.args
        data = self.eval(src)
        buf = self.env[dst.value.id]  # type: ignore[union-attr]
        idx = [self._index(i) for i in dst.indices]  # type: ignore[union-attr]
        if self.async_land == "issue":
            return self._store(buf, idx, data, s)
        self.pending.append((buf, idx, data, s, self.active))

    def _land_copies(self) -> None:
        pending, self.pending = self.pending, []
        saved = self.active
        for buf, idx, data, s, active in pending:
            self.active = active & saved
            self._store(buf, idx, data, s)
        self.active = saved
        # copies of threads that did not wait stay in flight
        self.pending = [(b, i, d, s, a & ~saved) for b, i, d, s, a in pending if bool(jnp.any(a & ~saved))]

    def _merge(self, new: Data, old: Data) -> Data:
        m = self.active
        return Data(jnp.where(m, new.v, old.v), jnp.where(m[..., None], new.tag, old.tag),
                    jnp.where(m, new.arity, old.arity))

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
                      jnp.zeros((self.B, size, LMAX), _ITYPE), jnp.zeros((self.B, size), _ITYPE))
        else:
            init = e.kwarg("init")
            fill = float(self._scalar(init)) if init is not None else 0.0
            buf = Buf(name, "local", dt, shape, None, jnp.full(self.shape + (size,), fill, jnp.float32),
                      jnp.zeros(self.shape + (size, LMAX), _ITYPE), jnp.zeros(self.shape + (size,), _ITYPE))
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

    # ------------------------------------------------------------ memory
    def _flat(self, buf: Buf, idx: list[jnp.ndarray]) -> tuple[jnp.ndarray, jnp.ndarray]:
        """Linear (physical) address and an in-bounds mask."""
        ok = jnp.ones(self.shape, bool)
        for c, extent in zip(idx, buf.shape):
            ok = ok & (c >= 0) & (c < extent)
        if buf.layout is not None:
            addr = jnp.asarray(buf.layout.evaluate(*[np.asarray(c) for c in idx]), _ITYPE)
        else:
            addr = jnp.zeros(self.shape, _ITYPE)
            for c, extent in zip(idx, buf.shape):
                addr = addr * extent + c
        return addr, ok

    def _oob(self, buf: Buf, ok: jnp.ndarray, s) -> None:
        bad = np.asarray(self.active & ~ok)
        if bad.any():
            b, t = (int(x) for x in np.argwhere(bad)[0])
            self.errors.append(f"line {s.span.line}: out-of-bounds access to {buf.name} by block "
                               f"{self.block_ids[b]}, thread {t}{self._iters()}")
        self._probe(s, {}, oob=bad)

    def _iters(self) -> str:
        return (", " + ", ".join(f"{k}={v}" for k, v in self.loop_vars.items())) if self.loop_vars else ""

    def load(self, buf: Buf, idx: list[jnp.ndarray], node) -> Data:
        addr, ok = self._flat(buf, idx)
        self._oob(buf, ok, node)
        safe = jnp.where(ok, addr, 0)
        b = jnp.arange(self.B)[:, None]
        if buf.space == "global":
            v = buf.data.reshape(-1)[safe]
        elif buf.space == "shared":
            v = buf.data[b, safe]
            self._race_check(buf, "load", ok, addr, node)
        else:
            v = buf.data[b, jnp.arange(self.T)[None, :], safe]
        v = jnp.where(ok, v, 0.0)
        if buf.tag_fn is not None:
            tag, arity = self._tag_of(buf, idx)
        elif buf.space == "global":
            tag, arity = jnp.zeros(self.shape + (LMAX,), _ITYPE), jnp.zeros(self.shape, _ITYPE)
        elif buf.space == "shared":
            tag, arity = buf.tag[b, safe], buf.arity[b, safe]  # type: ignore[index]
        else:
            t = jnp.arange(self.T)[None, :]
            tag, arity = buf.tag[b, t, safe], buf.arity[b, t, safe]  # type: ignore[index]
        return Data(v, tag, jnp.where(ok, arity, 0))

    def _check_stored_tag(self, buf: Buf, idx: list[jnp.ndarray], data: Data, s) -> None:
        """A store into a tagged buffer must store the element the tag names (ave/epilogue-placement,
        ave/shared-round-trip)."""
        want, want_ar = self._tag_of(buf, idx)
        holds = (data.arity == want_ar) & jnp.all(data.tag == want, axis=-1)
        inv = "ave/epilogue-placement" if buf.space == "global" else "ave/shared-round-trip"
        self._record(inv, s, holds[..., None], data.tag[:, :, None], data.arity[..., None], want[:, :, None],
                     want_ar[..., None])

    def _race_check(self, buf: Buf, kind: str, ok, addr, node) -> None:
        bs, ts = np.nonzero(np.asarray(self.active & ok))
        for pbuf, pidx, _d, ps, pact in self.pending:
            if pbuf is buf:
                paddr, pok = self._flat(buf, pidx)
                pb, pt = np.nonzero(np.asarray(pact & pok))
                self.races.in_flight(buf.name, set(zip(pb.tolist(), np.asarray(paddr)[pb, pt].tolist())),
                                     ps.span.line, bs, ts, np.asarray(addr)[bs, ts], node.span.line, self.loop_vars)
        self.races.access(id(buf), buf.name, buf.size, kind, bs, ts, np.asarray(addr)[bs, ts].astype(np.int64),
                          node.span.line, self.loop_vars)

    def _tag_of(self, buf: Buf, idx: list[jnp.ndarray]) -> tuple[jnp.ndarray, jnp.ndarray]:
        lam, captured = buf.tag_fn  # type: ignore[misc]
        saved = self.env
        self.env = dict(captured)
        for p, c in zip(lam.params, idx):
            self.env[p] = c
        body = lam.body.elts if isinstance(lam.body, A.Tuple) else (lam.body,)
        comps = [self._index(c) for c in body]
        self.env = saved
        tag = jnp.stack(comps + [jnp.zeros(self.shape, _ITYPE)] * (LMAX - len(comps)), axis=-1)
        return tag, jnp.full(self.shape, len(comps), _ITYPE)

    def _store(self, buf: Buf, idx: list[jnp.ndarray], data: Data, s) -> None:
        addr, ok = self._flat(buf, idx)
        self._oob(buf, ok, s)
        if buf.tag_fn is not None and self.shadow and buf.space != "local":
            self._check_stored_tag(buf, idx, data, s)
        m = np.asarray(self.active & ok)
        bs, ts = np.nonzero(m)
        a = np.asarray(addr)[bs, ts]
        vals = jnp.asarray(np.asarray(data.v)[bs, ts])
        if buf.space == "global":
            counts = self.write_counts.setdefault(buf.name, np.zeros(buf.size, np.int64))
            np.add.at(counts, a, 1)
            flat = buf.data.reshape(-1).at[a].set(vals)
            buf.data = flat.reshape(buf.data.shape)
            buf.written = True
            return
        tags, ar = np.asarray(data.tag)[bs, ts], np.asarray(data.arity)[bs, ts]
        if buf.space == "shared":
            self.races.access(id(buf), buf.name, buf.size, "store", bs, ts, a.astype(np.int64), s.span.line,
                              self.loop_vars)
            buf.data = buf.data.at[bs, a].set(vals)
            buf.tag = buf.tag.at[bs, a].set(tags)  # type: ignore[union-attr]
            buf.arity = buf.arity.at[bs, a].set(ar)  # type: ignore[union-attr]
        else:
            buf.data = buf.data.at[bs, ts, a].set(vals)
            buf.tag = buf.tag.at[bs, ts, a].set(tags)  # type: ignore[union-attr]
            buf.arity = buf.arity.at[bs, ts, a].set(ar)  # type: ignore[union-attr]

    # ------------------------------------------------------- expressions
    def _index(self, e: A.Expr) -> jnp.ndarray:
        v = self.eval(e)
        if isinstance(v, Data):  # a read of an index tensor (data-dependent index)
            if not bool(jnp.all(v.v == jnp.round(v.v))):
                raise SimulationError("a non-integer data value used as an index", e.span)
            return v.v.astype(_ITYPE)
        return self._ival(jnp.asarray(v, _ITYPE))

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
            return self._top(jnp.full(self.shape, e.value, jnp.float32))
        if isinstance(e, A.Subscript):
            buf = self.env[e.value.id]  # type: ignore[union-attr]
            return self.load(buf, [self._index(i) for i in e.indices], e)  # type: ignore[arg-type]
        if isinstance(e, A.BinOp):
            if e.op == "@":
                return Composed(self.eval(e.left), self.eval(e.right))
            return self._binop(e.op, self.eval(e.left), self.eval(e.right))
        if isinstance(e, A.UnaryOp):
            v = self.eval(e.operand)
            if isinstance(v, Data):
                return Data(-v.v if e.op == "-" else v.v, v.tag, v.arity)
            return {"-": lambda x: -x, "+": lambda x: x, "~": lambda x: ~x,
                    "not": lambda x: (x == 0).astype(_ITYPE)}[e.op](v)
        if isinstance(e, A.BoolOp):
            vals = [jnp.asarray(self.eval(x)) != 0 for x in e.values]
            out = vals[0]
            for x in vals[1:]:
                out = (out & x) if e.op == "and" else (out | x)
            return out.astype(_ITYPE)
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
            return f[op](a, b).astype(_ITYPE)
        cmp = {"==": jnp.equal, "!=": jnp.not_equal, "<": jnp.less, "<=": jnp.less_equal, ">": jnp.greater,
               ">=": jnp.greater_equal}
        return cmp[op](a, b).astype(_ITYPE)

    def _combine(self, v: jnp.ndarray, args: list[Data]) -> Data:
        """Elementwise result: the tag of the one full operand (arity > 0); with none, the first
        row statistic (arity < 0); two full operands: Top. Statistics must be the result row's
        (checked as ave/row-statistics, like the static invariant)."""
        full = [a.arity > 0 for a in args]
        stat = [a.arity < 0 for a in args]
        nfull = sum(f.astype(_ITYPE) for f in full)
        tag = jnp.zeros(self.shape + (LMAX,), _ITYPE)
        arity = jnp.zeros(self.shape, _ITYPE)
        for a, f in zip(args, full):
            tag = jnp.where((f & (nfull == 1))[..., None], a.tag, tag)
            arity = jnp.where(f & (nfull == 1), a.arity, arity)
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
        return Data(v, tag, arity)

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
            d = d if isinstance(d, Data) else self._top(jnp.asarray(d, jnp.float32))
            return Data(unary[name](d.v), d.tag, d.arity)
        if name == "cast":
            d = self.eval(e.args[0])
            d = d if isinstance(d, Data) else self._top(jnp.asarray(d, jnp.float32))
            dt = e.args[1].id  # type: ignore[union-attr]
            v = jnp.asarray(np.asarray(d.v).astype(_ROUND[dt]).astype(np.float32)) if dt in _ROUND else d.v
            return Data(v, d.tag, d.arity)
        if name in ("lane_max", "lane_sum"):
            return self._lane_reduce(e)
        if name in ("select", "fmax", "fmin"):
            args = [self.eval(a) for a in e.args]
            ds = [a if isinstance(a, Data) else self._top(jnp.asarray(a, jnp.float32)) for a in args]
            if name == "select":
                return self._combine(jnp.where(ds[0].v != 0, ds[1].v, ds[2].v), ds[1:])
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

    def _assert(self, e: A.Call, s) -> None:
        if not self.shadow:
            return
        _, lt, la = self._operand(e.args[0])
        _, rt, ra = self._operand(e.args[1])
        if e.func_name == "assert_tag_eq":
            holds = (la == ra) & jnp.all(lt == rt, axis=-1) & (la > 0)
        else:
            holds = self._relation(e.args[2], lt, la, rt, ra)
        self._record("ave/tag-assert", s, holds, lt, la, rt, ra)

    def _relation(self, lam: A.Lambda, lt, la, rt, ra) -> jnp.ndarray:
        names = {lam.params[0]: (lt, la), lam.params[1]: (rt, ra)}

        def go(x: A.Expr):
            if isinstance(x, A.Subscript) and isinstance(x.value, A.Name) and x.value.id in names:
                tag, arity = names[x.value.id]
                i = x.indices[0]
                k = int(self._const(i)) if not (isinstance(i, A.UnaryOp) and i.op == "-") else \
                    -int(self._const(i.operand))
                pos = jnp.where(k < 0, arity + k, k)
                return jnp.take_along_axis(tag, jnp.clip(pos, 0, LMAX - 1)[..., None], axis=-1)[..., 0]
            if isinstance(x, A.BinOp):
                return self._binop(x.op, go(x.left), go(x.right))
            if isinstance(x, A.BoolOp):
                vals = [jnp.asarray(go(v)) != 0 for v in x.values]
                out = vals[0]
                for v in vals[1:]:
                    out = (out & v) if x.op == "and" else (out | v)
                return out
            if isinstance(x, A.UnaryOp):
                inner = go(x.operand)
                return (inner == 0) if x.op == "not" else -inner
            v = self.eval(x)
            return jnp.asarray(v.v.astype(_ITYPE) if isinstance(v, Data) else v)[..., None]

        return (jnp.asarray(go(lam.body)) != 0) & (la > 0) & (ra > 0)

    def _record(self, inv: str, s, holds, lt, la, rt, ra, source: str = "") -> None:
        act = self.active[..., None] & jnp.ones(holds.shape, bool)
        bad = np.asarray(act & ~holds)
        key = (inv, s.span.line)
        f = self.failures.setdefault(key, Failure(inv, s.span.line, 0, 0, {}))
        f.checked += int(np.asarray(act).sum())
        n = int(bad.sum())
        if n:
            where = np.argwhere(bad)
            _merge_classes(f.classes, {"lanes": where[:, 1] % self.group, "value_index": where[:, 2]})
        if n and not f.failed:
            b, t, slot = (int(x) for x in np.argwhere(bad)[0])
            f.first = {"block": list(self.block_ids[b]), "thread": t, "lane": t % self.group,
                       "iterations": dict(self.loop_vars), "value_index": slot,
                       "lhs_tag": _tag_list(lt[b, t, slot], la[b, t, slot]),
                       "rhs_tag": _tag_list(rt[b, t, slot], ra[b, t, slot])}
        f.failed += n
        self._probe(s, {"lhs": (lt, la), "rhs": (rt, ra)}, source=source)

    def _probe(self, s, operands: dict, oob: np.ndarray | None = None, source: str = "") -> None:
        """Keep what meets at a statement for a replay (only the requested line and iterations)."""
        p = self.probe
        if p is None or p.get("line") != s.span.line:
            return
        if any(self.loop_vars.get(k) != v for k, v in p.get("iterations", {}).items()):
            return
        self.probes.append({"line": s.span.line, "iterations": dict(self.loop_vars), "oob": oob, "source": source,
                            "operands": {k: (np.asarray(t), np.asarray(a)) for k, (t, a) in operands.items()}})

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
        ar, ac = _maps(instr.a, g)
        br, bc = _maps(instr.b, g)
        cr, cc = _maps(instr.c, g)
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
                      jnp.zeros(self.shape + (instr.c.values, LMAX), _ITYPE),
                      jnp.zeros(self.shape + (instr.c.values,), _ITYPE))
            self.buffers[f"{name}@{id(out)}"] = out
            self.env[name] = out
        keep = np.asarray(self.active)[..., None]
        out.data = jnp.where(keep, d, out.data)
        if self.shadow:
            self._mma_shadow(instr, a, b, out, keep, s, (ar, ac, br, bc, cr, cc), W)

    def _mma_shadow(self, instr: Instruction, a: Buf, b: Buf, out: Buf, keep, s, maps, W: int) -> None:
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
        a_tag = at[:, :, a_slot[..., 0], a_slot[..., 1]]  # (B, W, M, K, LMAX)
        a_ar = aa[:, :, a_slot[..., 0], a_slot[..., 1]]
        b_tag = bt[:, :, b_slot[..., 0], b_slot[..., 1]]  # (B, W, K, N, LMAX)
        b_ar = ba[:, :, b_slot[..., 0], b_slot[..., 1]]
        ka = jnp.take_along_axis(a_tag, jnp.clip(a_ar - 1, 0, LMAX - 1)[..., None], -1)[..., 0]  # (B,W,M,K)
        kb = jnp.take_along_axis(b_tag, jnp.clip(jnp.where(b_ar >= 2, b_ar - 2, 0), 0, LMAX - 1)[..., None],
                                 -1)[..., 0]  # (B,W,K,N)
        ok = (ka[:, :, :, :, None] == kb[:, :, None, :, :]) & (a_ar > 0)[..., None] & (b_ar > 0)[:, :, None]
        wave_active = np.asarray(self.active).reshape(self.B, W, g).all(-1)
        bad = np.asarray(~ok) & wave_active[:, :, None, None, None]
        key = ("ave/mma-k-pairing", s.span.line)
        f = self.failures.setdefault(key, Failure("ave/mma-k-pairing", s.span.line, 0, 0, {}))
        f.checked += int(wave_active.sum()) * instr.m * instr.k * instr.n
        n = int(bad.sum())
        if n:
            where = np.argwhere(bad)  # (b, w, i, k, j)
            i_, k_, j_ = where[:, 2], where[:, 3], where[:, 4]
            _merge_classes(f.classes, {"lanes_a": a_slot[i_, k_, 0], "values_a": a_slot[i_, k_, 1],
                                       "lanes_b": b_slot[k_, j_, 0], "values_b": b_slot[k_, j_, 1], "k": k_})
        if n and not f.failed:
            bb, w, i, k, j = (int(x) for x in np.argwhere(bad)[0])
            la, va = (int(x) for x in a_slot[i, k])
            lb, vb = (int(x) for x in b_slot[k, j])
            f.first = {"block": list(self.block_ids[bb]), "group": w, "iterations": dict(self.loop_vars),
                       "k": k, "row": i, "col": j, "lane_a": la, "value_a": va, "lane_b": lb, "value_b": vb,
                       "a_tag": _tag_list(at[bb, w, la, va], aa[bb, w, la, va]),
                       "b_tag": _tag_list(bt[bb, w, lb, vb], ba[bb, w, lb, vb])}
        f.failed += n
        self._probe(s, {"a": (a.tag, a.arity), "b": (b.tag, b.arity)})
        # result tags: row components from A at k = 0, column component from B at k = 0
        ct = jnp.zeros((self.B, W, instr.m, instr.n, LMAX), _ITYPE)
        rows = a_tag[:, :, :, 0]  # (B, W, M, LMAX)
        cols = b_tag[:, :, 0, :]  # (B, W, N, LMAX)
        arow, bcol = a_ar[:, :, :, 0], b_ar[:, :, 0, :]
        lmax_idx = jnp.arange(LMAX)
        res_ar = jnp.where((arow[:, :, :, None] > 0) & (bcol[:, :, None, :] > 0), arow[:, :, :, None], 0)
        take_b = lmax_idx[None, None, None, None, :] == (res_ar - 1)[..., None]
        bval = jnp.take_along_axis(cols, jnp.clip(bcol - 1, 0, LMAX - 1)[..., None], -1)[..., 0]  # (B,W,N)
        ct = jnp.where(take_b, bval[:, :, None, :, None], rows[:, :, :, None, :])
        ct = jnp.where(lmax_idx < res_ar[..., None], ct, 0)
        slot_tag = ct[:, :, cr, cc].reshape(self.B, self.T, -1, LMAX)
        slot_ar = res_ar[:, :, cr, cc].reshape(self.B, self.T, -1)
        out.tag = jnp.where(keep[..., None], slot_tag, out.tag)  # type: ignore[arg-type]
        out.arity = jnp.where(keep, slot_ar, out.arity)  # type: ignore[arg-type]


def _merge_classes(into: dict, new: dict) -> None:
    for key, values in new.items():
        into[key] = sorted(set(into.get(key, [])) | {int(v) for v in np.unique(values)})


def _tag_list(tag, arity) -> list[int]:
    n = abs(int(np.asarray(arity)))
    return [int(x) for x in np.asarray(tag)[:n]]


@lru_cache(maxsize=None)
def _maps(op: OperandMap, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of every (lane, value) slot, as (lanes, values) integer arrays."""
    lane, v = np.meshgrid(np.arange(lanes), np.arange(op.values), indexing="ij")
    env = {"lane": lane, "v": v}
    return eval(_py(op.row), {}, env), eval(_py(op.col), {}, env)  # noqa: S307 - library map strings


def _py(text: str):
    from .parser import parse_expression
    from .printer import expr

    return compile(expr(parse_expression(text)), text, "eval")


def _elts(e: A.Expr | None) -> tuple:
    if e is None:
        return ()
    return e.elts if isinstance(e, A.Tuple) else (e,)


# -------------------------------------------------------------------- reference
def reference_of(kernel: A.Kernel) -> tuple[str, str] | None:
    """`@kernel(..., reference="C = A @ B")`: (output tensor, numpy expression)."""
    ref = kernel.decorator.kwarg("reference")
    if ref is None:
        return None
    if not isinstance(ref, A.Str) or "=" not in ref.value:
        raise FrontEndError('reference= takes a string "OUT = expression"', ref.span)
    out, expr = ref.value.split("=", 1)
    return out.strip(), expr.strip()


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v per head, query heads grouped onto KV heads (GQA):
    q (H, S, D), k and v (HKV, S, D) with H a multiple of HKV; head h reads KV head h // (H // HKV)."""
    heads, seq, dim = q.shape
    group = heads // k.shape[0]
    out = np.zeros_like(q)
    for h in range(heads):
        scores = q[h] @ k[h // group].T / np.sqrt(dim)
        if causal:
            scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        out[h] = (p / p.sum(axis=1, keepdims=True)) @ v[h // group]
    return out


def moe_reference(x: np.ndarray, w: np.ndarray, sorted_ids: np.ndarray, expert_ids: np.ndarray,
                  weights: np.ndarray, topk: int, block: int = 32) -> np.ndarray:
    """Routed expert GEMM: row i of the sorted order is token-slot s = sorted_ids[i] (token
    s // topk), computed with expert expert_ids[i // block] and scaled by weights[s]; the result
    lands in row s."""
    out = np.zeros((sorted_ids.shape[0], w.shape[2]))
    for i, s in enumerate(sorted_ids.astype(int)):
        out[s] = (x[s // topk] @ w[int(expert_ids[i // block])]) * weights[s]
    return out


def evaluate_reference(expr: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """A numpy expression over the input tensors, in float64 (names: inputs, np, exp, exp2, max, ...)."""
    tree = pyast.parse(expr, mode="eval")
    allowed = (pyast.Expression, pyast.BinOp, pyast.UnaryOp, pyast.Call, pyast.Name, pyast.Load, pyast.Constant,
               pyast.Attribute, pyast.keyword, pyast.Subscript, pyast.Slice, pyast.Tuple, pyast.operator,
               pyast.unaryop)
    for node in pyast.walk(tree):
        if not isinstance(node, allowed):
            raise ValueError(f"reference expression uses {type(node).__name__}")
    env = {k: v.astype(np.float64) for k, v in inputs.items()}
    env.update(np=np, exp=np.exp, exp2=np.exp2, transpose=np.transpose, sum=np.sum, max=np.max,
               attention=attention_reference, moe=moe_reference)
    return np.asarray(eval(compile(tree, "<reference>", "eval"), {"__builtins__": {}}, env))  # noqa: S307


def compare(out: np.ndarray, ref: np.ndarray, tol: float = 1e-3) -> dict:
    """Max abs error and max error relative to the reference's magnitude (float32 accumulation)."""
    if out.shape != ref.shape:
        return {"ok": False, "max_abs": float("inf"), "rel": float("inf"), "tol": tol,
                "why": f"shape {out.shape} vs reference {ref.shape}"}
    diff = np.abs(out.astype(np.float64) - ref)
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    rel = float(diff.max() / scale) if diff.size else 0.0
    worst = np.unravel_index(int(diff.argmax()), diff.shape) if diff.size else ()
    return {"ok": rel <= tol, "max_abs": float(diff.max()) if diff.size else 0.0, "rel": rel, "tol": tol,
            "worst_index": [int(i) for i in worst],
            "mismatched": int((diff > tol * scale).sum()), "elements": int(diff.size)}


def tensor_dims(p: A.Param) -> tuple[A.Expr, ...]:
    """The dimension expressions of a tensor parameter `Tensor[dtype, (d0, d1, ...)]` (none for a size)."""
    if not isinstance(p.annotation, A.Subscript) or len(p.annotation.indices) < 2:
        return ()
    dims = p.annotation.indices[1]
    return dims.elts if isinstance(dims, A.Tuple) else (dims,)


def tensor_shape(p: A.Param, sizes: dict[str, int]) -> tuple[int, ...]:
    """The shape of a tensor parameter at these sizes (KeyError for a size not given)."""
    return tuple(sizes[d.id] if isinstance(d, A.Name) else d.value for d in tensor_dims(p))  # type: ignore[union-attr]


def _with_entries(values: np.ndarray, entries: list[list[int]], permutation: bool) -> np.ndarray:
    """An index table holding the given [coordinates..., value] entries (those inside its shape).
    A permutation stays one: each entry's value is swapped in from where it was, which keeps
    every earlier entry because the entries themselves are injective."""
    out = values.copy()
    flat = out.reshape(-1)
    for *coords, value in entries:
        if len(coords) != out.ndim or not all(0 <= c < n for c, n in zip(coords, out.shape)):
            continue
        at = int(np.ravel_multi_index(tuple(coords), out.shape))
        if permutation:
            where = np.flatnonzero(flat == value)
            if where.size:
                flat[where[0]] = flat[at]
        flat[at] = value
    return out


def simulate_source(src: SourceFile, sizes: dict[str, int], kernel: str | None = None, seed: int = 0,
                    blocks: list[tuple[int, ...]] | None = None, shadow: bool = True,
                    probe: dict | None = None, block_prefix: tuple[int, ...] | None = None,
                    async_land: str = "wait",
                    index_entries: dict[str, list[list[int]]] | None = None) -> list[tuple[str, SimResult]]:
    """Parse and simulate the kernels of a file (all, or the one named)."""
    from .parser import parse_source

    module = parse_source(src)
    imports = resolve_imports(module)
    out = []
    jax.config.update("jax_platforms", "cpu")
    for k in module.kernels:
        if kernel is not None and k.name != kernel:
            continue
        if block_prefix is not None:
            blocks = [block_prefix]
        sim = Simulator(k, imports, sizes, blocks=blocks, seed=seed, shadow=shadow, probe=probe, async_land=async_land,
                        index_entries=index_entries)
        result = sim.run()
        ref = reference_of(k)
        if ref is not None:
            name, expr = ref
            if name not in result.outputs:
                result.reference = {"ok": False, "why": f"the kernel never writes {name}", "output": name}
            else:
                r = compare(result.outputs[name], evaluate_reference(expr, result.inputs))
                r["output"] = name
                r["expression"] = expr
                result.reference = r
        out.append((k.name, result))
    return out
