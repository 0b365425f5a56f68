"""The shared lowering: one checked kernel -> one LLVM module of per-thread code for a target.

Statements execute per thread (the GPU's model; the simulator's lockstep is one schedule of it).
Tags, `assume` and assertions generate no code. Loops with constant bounds and small bodies are
unrolled, so register arrays indexed by their variables become registers (SROA after unrolling);
other loops are real loops. The target hooks (target.py) supply ids, barriers, shared memory and
warp operations; everything else is the same IR on every target.
"""
from __future__ import annotations

from llvmlite import ir

from ..hw.instructions import Instruction, LoadMatrix
from ..lang import ast as A
from ..lang.consts import const_int
from ..lang.resolve import SCHEDULING_HINTS, SLOT_REDUCTIONS
from . import kinds as K
from .abi import KernelSignature, TensorParam, signature
from .consts import single_assignments
from .dtypes import F32, I32, storage_type
from .errors import CodegenError
from .lower_exprs import ExprLowering
from .lower_instrs import InstrLowering
from .lower_memory import MemoryLowering
from .target import CodegenTarget, LoweredKernel
from .uniform import BLOCK, THREAD, level, loop_level, name_levels
from .values import ConstInt, GlobalTensor, LayoutConst, LocalArray, Val, Var

UNROLL_TRIPS = 64  # a constant loop of at most this many iterations is unrolled...
UNROLL_STATEMENTS = 4096  # ...unless the unrolled body would exceed this many statements
# statements with no code on this target: the verifier's, and AMD's scheduling hints (the amdgpu
# backend emits those; elsewhere they order nothing)
NO_CODE = {"assume", "tag", "reset_tags", "assert_tag", "assert_tag_eq", "assert_mask", *SCHEDULING_HINTS}


def _size(stmts: tuple[A.Stmt, ...]) -> int:
    n = 0
    for s in stmts:
        n += 1
        if isinstance(s, A.For):
            n += _size(s.body) * max(1, _trips(s) or 1)
        elif isinstance(s, A.If):
            n += _size(s.body) + _size(s.orelse)
    return n


def _trips(s: A.For) -> int | None:
    args = [const_int(a, {}) for a in s.iter.args] if isinstance(s.iter, A.Call) else [None]
    if any(a is None for a in args) or not args:
        return None
    lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    return len(range(lo, hi, step)) if step else None  # type: ignore[arg-type]


class KernelLowering(ExprLowering, MemoryLowering, InstrLowering):
    def __init__(self, kernel: A.Kernel, imports: dict[str, Instruction | LoadMatrix], target: CodegenTarget,
                 barriers_proven: bool = False):
        self.k = kernel
        self.barriers_proven = barriers_proven  # ave/barrier-divergence holds: every wave reaches the same barriers
        self.imports = imports
        self.t = target
        self.sig: KernelSignature = signature(kernel)
        self.kinds = K.infer(kernel, imports)
        self.defs = single_assignments(kernel.body)
        self.levels = name_levels(kernel.body)
        # the enclosing `if`s and loops whose condition or trip count may differ between threads, with its level
        self.divergent: list[tuple[A.If | A.For, int]] = []
        self.module = ir.Module(name=kernel.name)
        self.module.triple = target.triple
        self.module.data_layout = target.data_layout
        self.info = LoweredKernel(kernel.name, threads=self.sig.threads, block=self.sig.block, group=self.sig.group)
        self.env: dict[str, object] = {}
        self.shared_arrays: dict[int, object] = {}
        self.local_arrays: dict[int, object] = {}

    # -------------------------------------------------------------- kernel
    def lower(self) -> tuple[ir.Module, LoweredKernel]:
        types = [ir.PointerType(addrspace=self.t.global_space) if isinstance(p, TensorParam) else I32
                 for p in self.sig.params]
        fn, args = self.t.begin_kernel(self.module, self.k.name, types)
        entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.ab = ir.IRBuilder(entry)
        self.t.entry = self.ab
        self.b = ir.IRBuilder(body)
        self.t.prologue(self.b, self.info)
        sizes: dict[str, Val] = {}
        for p, arg in zip(self.sig.params, args):
            arg.name = p if isinstance(p, str) else p.name
            if isinstance(p, str):
                sizes[p] = Val(arg, "int")
                self.env[p] = sizes[p]
        spans = {p.name: p.span for p in self.k.params}
        for p, arg in zip(self.sig.params, args):
            if isinstance(p, TensorParam):
                storage_type(p.dtype, spans.get(p.name))
                arg.add_attribute("noalias")
                dims = tuple(sizes[d] if isinstance(d, str) else self.const(d) for d in p.dims)
                self.env[p.name] = GlobalTensor(p.name, arg, p.dtype, dims)
        self.linear = self._linear_tid()
        g = ir.Constant(I32, self.sig.group)
        self.lane = self.b.urem(self.linear, g)
        self.warp = self.b.udiv(self.linear, g)
        self.stmts(self.k.body)
        self.b.ret_void()
        self.ab.branch(body)
        self.t.finish(self.module, fn, self.info)
        return self.module, self.info

    def _linear_tid(self) -> ir.Value:
        lin = None
        for d in reversed(range(len(self.sig.block))):
            t = self.t.thread_id(self.b, d)
            lin = t if lin is None else self.b.add(self.b.mul(lin, ir.Constant(I32, self.sig.block[d])), t)
        return lin if lin is not None else ir.Constant(I32, 0)

    def require_converged(self, what: str, e: A.Expr, barrier: bool = False) -> None:
        """Warp operations need every lane of their warp; a barrier needs every thread of the block,
        which under a warp-dependent condition only the verifier's proof guarantees (uniform.py)."""
        for s, lv in reversed(self.divergent):
            where = f"inside the {'`if`' if isinstance(s, A.If) else 'loop'} of line {s.span.line}"
            if lv == THREAD:
                raise CodegenError(f"{what} {where}, whose {'condition' if isinstance(s, A.If) else 'trip count'} "
                                   f"may differ between threads: undefined on a GPU (threads wait for threads that "
                                   f"never arrive)", e.span)
            if barrier and not self.barriers_proven:
                raise CodegenError(f"{what} {where}, which differs between warps/waves: it compiles only when the "
                                   f"verifier proves ave/barrier-divergence (every wave reaches the same barriers)",
                                   e.span)

    def require_group(self, size: int, e: A.Expr) -> None:
        if self.sig.group != size:
            raise CodegenError(f"this needs a {size}-lane warp/wave; the kernel declares {self.sig.group}", e.span)
        if size > self.t.max_group:
            raise CodegenError(f"target {self.t.name} has no {size}-lane warps/waves", e.span)

    def const_arg(self, e: A.Expr) -> int:
        v = const_int(e, self.consts())
        if v is None:
            raise CodegenError("a compile-time constant is needed here", e.span)
        return v

    # ----------------------------------------------------------- statements
    def stmts(self, body: tuple[A.Stmt, ...]) -> None:
        for s in body:
            if self.b.block.is_terminated:
                return
            self.stmt(s)

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Pass):
            return
        if isinstance(s, A.For):
            return self.loop(s)
        if isinstance(s, A.If):
            return self.branch(s)
        if isinstance(s, A.ExprStmt):
            return self.call_stmt(s.expr, s)
        if isinstance(s, A.Assign):
            return self.assign(s.target, s.value, s)
        if isinstance(s, A.AugAssign):
            return self.assign(s.target, A.BinOp(s.op, s.target, s.value, s.span), s)
        raise CodegenError("statement not supported by the code generator", getattr(s, "span", None))

    def call_stmt(self, e: A.Expr, s: A.Stmt) -> None:
        name = e.func_name if isinstance(e, A.Call) else None
        if name in NO_CODE:
            return
        if name == "syncthreads":
            self.require_converged("syncthreads()", e, barrier=True)
            return self.t.barrier(self.b)
        if name == "async_wait":
            if e.args:  # type: ignore[union-attr]
                return self.t.async_wait_group(self.b, const_int(e.args[0], {}) or 0)  # type: ignore[union-attr]
            return self.t.async_wait(self.b)
        if name == "async_commit":
            return self.t.async_commit(self.b)
        if name == "async_copy":
            return self.async_copy(e)  # type: ignore[arg-type]
        raise CodegenError("this statement has no effect the code generator knows", e.span)

    def assign(self, target: A.Expr, value: A.Expr, s: A.Stmt) -> None:
        if isinstance(target, A.Subscript):
            return self.store(target, self.expr(value))
        if not isinstance(target, A.Name):
            raise CodegenError("assign to a name or an element", target.span)
        name = target.id
        if isinstance(value, A.Call) and value.func_name in ("shared", "local"):
            return self.alloc(name, value, s)
        if isinstance(value, A.Call) and value.func_name == "subview" and "subview" not in self.env:
            return self.subview(name, value)
        if isinstance(value, A.Call) and isinstance(self.imports.get(value.func_name), LoadMatrix):
            return self.ldmatrix(name, value, s)
        if isinstance(value, A.Call) and isinstance(self.imports.get(value.func_name), Instruction):
            return self.mma(name, value, s)
        arr = self.env.get(value.args[0].id) if isinstance(value, A.Call) and value.func_name in SLOT_REDUCTIONS \
            and value.args and isinstance(value.args[0], A.Name) else None
        if isinstance(arr, LocalArray) and len(arr.shape) >= 2:  # reduce_max(s, axis=a): a register array
            return self.axis_reduce(name, value, s)
        if name in self.kinds.layouts:
            self.env[name] = LayoutConst(self.layout_value(value))
            return
        v = self.expr(value)
        slot = self.env.get(name)
        if slot is None:
            kind = self.kinds.scalars.get(name, "float" if v.kind == "float" else "int")
            slot = self.new_var(name, kind)
            self.env[name] = slot
        if not isinstance(slot, Var):
            raise CodegenError(f"{name} cannot be reassigned here (it is a buffer, size or unrolled loop variable)",
                               target.span)
        self.b.store(self.coerce(v, slot.kind), slot.slot)

    def new_var(self, name: str, kind: str) -> Var:
        """A zero-initialised slot in the entry block: a variable first assigned in a branch is
        never read undefined (the simulator, too, gives its threads a value)."""
        ty = F32 if kind == "float" else I32
        slot = self.t.alloca(self.ab, ty, name)
        self.ab.store(ir.Constant(ty, 0.0 if kind == "float" else 0), slot)
        return Var(slot, kind)

    def loop(self, s: A.For) -> None:
        it = s.iter
        if not isinstance(it, A.Call) or it.func_name != "range" or not 1 <= len(it.args) <= 3:
            raise CodegenError("loops iterate over range(...)", s.span)
        consts = self.consts()
        args = [const_int(a, consts) for a in it.args]
        if all(a is not None for a in args):
            lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
            if step == 0:
                raise CodegenError("range() step must not be zero", it.span)
            trips = range(lo, hi, step)  # type: ignore[arg-type]
            body = s.body
            if (len(body) == 1 and isinstance(body[0], A.ExprStmt) and isinstance(body[0].expr, A.Call)
                    and body[0].expr.func_name == "async_copy" and lo == 0 and step == 1 and len(trips) > 1
                    and self.vector_copy(s, len(trips))):
                return
            if len(trips) <= UNROLL_TRIPS and len(trips) * _size(body) <= UNROLL_STATEMENTS:
                return self.unrolled(s, list(trips))
        step_v = const_int(it.args[2], consts) if len(it.args) == 3 else 1
        if not step_v:
            raise CodegenError("a loop with non-constant bounds needs a constant, non-zero step", it.span)
        lo_v = self.as_int(self.expr(it.args[0])) if len(it.args) > 1 else ir.Constant(I32, 0)
        hi_v = self.as_int(self.expr(it.args[1] if len(it.args) > 1 else it.args[0]))
        trips = loop_level(s, self.levels)
        if trips > BLOCK:
            self.divergent.append((s, trips))
        self.real_loop(s, lo_v, hi_v, step_v)
        if trips > BLOCK:
            self.divergent.pop()

    def unrolled(self, s: A.For, values: list[int]) -> None:
        saved = self.env.get(s.var)
        for v in values:
            self.env[s.var] = ConstInt(v)
            self.stmts(s.body)
        self._restore(s.var, saved)

    def _restore(self, name: str, saved: object) -> None:
        """After a loop its variable's earlier binding is back (or none): a later `i = A[t]` gets
        its own slot of its own kind, never the loop's integer one."""
        if saved is None:
            self.env.pop(name, None)
        else:
            self.env[name] = saved

    def real_loop(self, s: A.For, lo: ir.Value, hi: ir.Value, step: int) -> None:
        b = self.b
        induction = self.t.alloca(self.ab, I32, f"{s.var}.i")
        b.store(lo, induction)
        head, body, done = (b.append_basic_block(f"{s.var}.{x}") for x in ("head", "body", "done"))
        b.branch(head)
        b.position_at_end(head)
        i = b.load(induction)
        b.cbranch(b.icmp_signed("<" if step > 0 else ">", i, hi), body, done)
        b.position_at_end(body)
        saved = self.env.get(s.var)
        var = self.new_var(s.var, "int")
        self.env[s.var] = var
        b.store(b.load(induction), var.slot)
        self.stmts(s.body)
        if not self.b.block.is_terminated:
            self.b.store(self.b.add(self.b.load(induction), ir.Constant(I32, step)), induction)
            self.b.branch(head)
        self.b.position_at_end(done)
        self._restore(s.var, saved)

    def branch(self, s: A.If) -> None:
        cond = self.as_bool(self.expr(s.cond))
        varying = level(s.cond, self.levels)
        if varying > BLOCK:
            self.divergent.append((s, varying))
        b = self.b
        then, other, merge = (b.append_basic_block(x) for x in ("if.then", "if.else", "if.end"))
        b.cbranch(cond, then, other)
        for block, stmts in ((then, s.body), (other, s.orelse)):
            self.b.position_at_end(block)
            self.stmts(stmts)
            if not self.b.block.is_terminated:
                self.b.branch(merge)
        self.b.position_at_end(merge)
        if varying > BLOCK:
            self.divergent.pop()

    # -------------------------------------------------------------- calls
    def call(self, e: A.Call) -> Val:
        name = e.func_name
        if name in ("thread_id", "block_id"):
            d = self.const_arg(e.args[0]) if e.args else 0
            rank = len(self.sig.block) if name == "thread_id" else len(self.sig.grid)
            if not 0 <= d < max(rank, 1):
                raise CodegenError(f"{name}({d}): the launch has {rank} dimensions", e.span)
            hook = self.t.thread_id if name == "thread_id" else self.t.block_id
            return Val(hook(self.b, d), "int")
        if name == "lane_id":
            return Val(self.lane, "int")
        if name in ("warp_id", "wave_id"):
            return Val(self.warp, "int")
        if name in ("min", "max", "fmin", "fmax") and len(e.args) == 2:
            return self.minmax(name, self.expr(e.args[0]), self.expr(e.args[1]))
        if name in ("exp2", "exp", "sqrt", "rsqrt") and len(e.args) == 1:
            return Val(self.unary_math(name, self.as_float(self.expr(e.args[0]))), "float")
        if name == "abs" and len(e.args) == 1:
            x = self.expr(e.args[0])
            if x.kind == "float":
                return Val(self.unary_math("abs", x.v), "float")
            xi = self.as_int(x)
            return Val(self.b.select(self.b.icmp_signed("<", xi, ir.Constant(I32, 0)), self.b.neg(xi), xi), "int")
        if name == "cast" and len(e.args) == 2 and isinstance(e.args[1], A.Name):
            storage_type(e.args[1].id, e.args[1].span)
            return self.cast(self.expr(e.args[0]), e.args[1].id)
        if name in ("lane_max", "lane_sum"):
            return self.lane_reduce(e)
        if name in ("shuffle_xor", "shuffle", "readfirstlane"):
            return self.lane_exchange(e)
        if name in ("reduce_max", "reduce_sum"):
            return self.slot_reduce(e)
        if name == "select" and len(e.args) == 3:
            return self.choose(self.expr(e.args[0]), self.expr(e.args[1]), self.expr(e.args[2]))
        raise CodegenError(f"{name}() is not supported by the code generator", e.span)


def lower_kernel(kernel: A.Kernel, imports: dict, target: CodegenTarget,
                 barriers_proven: bool = False) -> tuple[ir.Module, LoweredKernel]:
    """`barriers_proven`: the verifier proved ave/barrier-divergence for this kernel, so barriers
    under warp-dependent conditions (wave specialization) compile."""
    return KernelLowering(kernel, imports, target, barriers_proven).lower()
