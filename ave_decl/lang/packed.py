"""Packed data and reinterpreting views, rewritten right after the predicated accesses into the
per-element register moves they mean, so the verifier, the simulator and the backends see plain
element loads and stores (and tags flow per element through packing for free):

    p = pack(bf16x2, x, y)               ->   p = local(bf16, (2,))     (hoisted to the kernel's top)
                                              p[0] = x; p[1] = y
    w = bitcast(p, u32)                  ->   w[0] = p[0]; w[1] = p[1]  (a word keeps the elements it holds)
    q = perm(w1, w0, 0x05040100)         ->   q[0] = w0[0]; q[1] = w1[0]
    Vw = view(Vt, u32, (64, 32))         ->   (no statement: Vw[n, c] names Vt's bf16 elements 2*(32n+c)+{0,1})
    Vw[n, c] = q                         ->   Vt[(2 * (n * 32 + c)) // 64, ...] = q[0]; ... = q[1]
    v = load_vec(A[r, c], 8)             ->   v[j] = A[r, c + j] for j < 8
    b = Bs[r]                            ->   b[j] = Bs[r, j] (partial indexing of a register/shared row)

A packed value is a register holding `n` *parts* of one element type. A bitcast to a word (`u32`,
`i32` or a vector of them) keeps its parts; a bitcast or view that would reinterpret an element
as another type of the same size, or split or merge elements, is refused with a location: those
bits are not an element any tag could name. `perm` (AMD `v_perm_b32`) and `prmt` (NVIDIA
`prmt.b32`) take constant selectors; each result element must be one whole element of a source
(or zero bytes, a zero value), else the selector is refused at its position.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..hw.dtypes import DTYPE_BYTES, DTYPES
from . import ast as A
from .buffer_ops import tensor_params
from .consts import const_int
from .depth import rewrite, walk
from .errors import FrontEndError

CALLS = ("pack", "bitcast", "perm", "prmt", "load_vec", "store_vec", "view")
VECTOR = re.compile(r"^(bf16|f16|f32|fp8|bf8|i8|i32|u32)x(2|4|8|16)$")
WORD_ELEMENTS = ("u32", "i32")  # a bitcast or view to these (or vectors of them) keeps the parts
MEMORY_VECTOR_BYTES = (4, 8, 16)  # what one vector load/store of shared or global memory moves
MAX_VECTOR_BYTES = 16


def vector_type(name: str) -> tuple[str, int] | None:
    """(element type, count) of a vector type name such as `bf16x2`; None for anything else."""
    m = VECTOR.match(name)
    if m is None:
        return None
    elem, n = m.group(1), int(m.group(2))
    return (elem, n) if n * DTYPE_BYTES[elem] <= MAX_VECTOR_BYTES else None


def type_info(name: str) -> tuple[str, int] | None:
    """(element type, count) of a scalar or vector type name."""
    return (name, 1) if name in DTYPES else vector_type(name)


@dataclass(frozen=True)
class Packed:
    """What a packed value holds: `n` parts of element type `part`, declared as `type`."""

    part: str
    n: int
    type: str

    @property
    def nbytes(self) -> int:
        return self.n * DTYPE_BYTES[self.part]


@dataclass(frozen=True)
class _Parts:
    """A packed value's parts (or the places a packed value is stored to): each an expression
    (or an element reference), and, when every part is one formula of its index, that formula, so
    that a move is one loop statement (`for j in range(n): dst(j) = src(j)`) instead of n: the
    verifier then follows one store per move, as for a hand-written copy loop."""

    info: Packed
    items: tuple[A.Expr, ...]
    at: Callable[[A.Expr], A.Expr] | None = None


def _uniform(info: Packed, at: Callable[[A.Expr], A.Expr], sp) -> _Parts:
    return _Parts(info, tuple(at(A.Int(j, sp)) for j in range(info.n)), at)


@dataclass(frozen=True)
class _Storage:
    dtype: str
    dims: tuple[A.Expr, ...]
    space: str  # tensor | shared | local
    layout: bool = False  # a shared buffer declared with a layout


@dataclass(frozen=True)
class _View:
    storage: str
    dims: tuple[int, ...]  # the storage's (constant) shape
    packed: Packed  # what one view element holds (its parts are storage elements)
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    prefix: int  # leading dimensions the view shares with its storage (see `_shared_prefix`)


def _err(msg: str, node) -> FrontEndError:
    return FrontEndError(msg, node.span)


def _int(e: A.Expr, what: str) -> int:
    v = const_int(e, {})
    if v is None:
        raise _err(f"{what} must be a constant integer", e)
    return v


def _shape(e: A.Expr, what: str) -> tuple[int, ...]:
    elts = e.elts if isinstance(e, A.Tuple) else (e,)
    dims = tuple(_int(d, f"an extent of {what}") for d in elts)
    if not dims or any(d <= 0 for d in dims):
        raise _err(f"the extents of {what} must be positive", e)
    return dims


def _strides(dims: tuple[int, ...], col: bool) -> tuple[int, ...]:
    order = range(len(dims)) if col else range(len(dims) - 1, -1, -1)
    out, acc = [0] * len(dims), 1
    for i in order:
        out[i], acc = acc, acc * dims[i]
    return tuple(out)


def _add(a: A.Expr, b: A.Expr, sp) -> A.Expr:
    if isinstance(b, A.Int) and b.value == 0:
        return a
    if isinstance(a, A.Int) and a.value == 0:
        return b
    return A.BinOp("+", a, b, sp)


def _mul(k: int, a: A.Expr, sp) -> A.Expr:
    if k == 1:
        return a
    if k == 0:
        return A.Int(0, sp)
    return A.BinOp("*", A.Int(k, sp), a, sp) if not isinstance(a, A.Int) else A.Int(k * a.value, sp)


def _shared_prefix(shape: tuple[int, ...], dims: tuple[int, ...], k: int) -> int:
    """How many leading dimensions a row-major view shares with its storage: the longest p with
    the same leading extents whose remaining dimensions hold the same number of storage elements
    (a u32 view (2, 128, 16) of bf16 (2, 128, 32): 2). Those indices are the storage's coordinates
    as they stand, so only the rest is unravelled: a packed store's page and row stay plain terms
    (the solver compares them without division, and a slice of the storage is recognisable), and
    an index past a view dimension there lands outside the storage's row (ave/buffer-bounds)
    instead of wrapping into the next one."""
    for p in range(min(len(shape), len(dims) - 1), 0, -1):
        if shape[:p] == dims[:p] and k * math.prod(shape[p:]) == math.prod(dims[p:]):
            return p
    return 0


def _unravel(offset: A.Expr, dims: tuple[int, ...], sp) -> tuple[A.Expr, ...]:
    """Row-major coordinates of a linear offset (the storage's element order)."""
    if len(dims) == 1:
        return (offset,)
    out, inner = [], 1
    for d in reversed(dims):
        q = A.BinOp("//", offset, A.Int(inner, sp), sp) if inner > 1 else offset
        out.append(A.BinOp("%", q, A.Int(d, sp), sp) if len(out) < len(dims) - 1 else q)
        inner *= d
    return tuple(reversed(out))


def _names_in(e, name: str) -> bool:
    return any(isinstance(n, A.Name) and n.id == name for n in walk(e))


class _Rewriter:
    def __init__(self, kernel: A.Kernel):
        self.storages: dict[str, _Storage] = {
            n: _Storage(dt, dims, "tensor") for n, (dt, dims) in tensor_params(kernel).items()}
        self.views: dict[str, _View] = {}
        self.vectors: dict[str, Packed] = {}  # register vectors made here (a local of `n` parts)
        self.vector_arrays: dict[str, Packed] = {}  # local(bf16x2, dims): one Packed per trailing row
        self.hoisted: list[A.Stmt] = []
        self.kernel = kernel
        self._taken: set[str] | None = None  # the kernel's names, gathered on the first fresh name

    # ------------------------------------------------------------ statements
    def block(self, body: tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
        out: list[A.Stmt] = []
        for s in body:
            if isinstance(s, A.For):
                inner = self.block(s.body)
                out.append(s if inner is s.body else replace(s, body=inner))
            elif isinstance(s, A.If):
                cond, then, orelse = self.expr(s.cond), self.block(s.body), self.block(s.orelse)
                same = cond is s.cond and then is s.body and orelse is s.orelse
                out.append(s if same else replace(s, cond=cond, body=then, orelse=orelse))
            elif isinstance(s, A.Assign):
                out.extend(self.assign(s))
            elif isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name == "store_vec":
                out.extend(self.store_vec(s, s.expr))
            else:
                out.append(self.expr(s))
        unchanged = len(out) == len(body) and all(a is b for a, b in zip(out, body))
        return body if unchanged else tuple(out)  # identity tells the caller nothing was rewritten

    def assign(self, s: A.Assign) -> list[A.Stmt]:
        target, value = s.target, s.value
        if isinstance(value, A.Call) and value.func_name in ("shared", "local") and isinstance(target, A.Name):
            return [self.declare(s, target, value)]
        if isinstance(value, A.Call) and value.func_name == "view":
            if not isinstance(target, A.Name):
                raise _err("view(...) must be assigned to a name", target)
            self.view(target, value)
            return []
        packed = self.vector(value)
        if isinstance(target, A.Subscript) and self._location(target) is not None:
            return self.store(s, target, value, packed)
        if packed is None:
            return [self.expr(s)]
        if not isinstance(target, A.Name):
            raise _err(f"a {packed.info.type} value can be assigned to a name or stored into a row or a view "
                       f"element", target)
        return self.bind(s, target, packed)

    def declare(self, s: A.Assign, target: A.Name, call: A.Call) -> A.Stmt:
        """Record a buffer's element type and shape; a vector element type in local() becomes a
        trailing dimension of its parts."""
        if len(call.args) < 2 or not isinstance(call.args[0], A.Name):
            return s  # the lowering reports the malformed declaration
        dt = call.args[0].id
        dims = call.args[1].elts if isinstance(call.args[1], A.Tuple) else (call.args[1],)
        vec = vector_type(dt)
        if vec is not None:
            if call.func_name == "shared":
                raise _err(f"shared buffers hold scalar elements: declare {target.id} as shared({vec[0]}, ...) "
                           f"and read it packed through view({target.id}, {dt}, shape)", call.args[0])
            elem, n = vec
            self.vector_arrays[target.id] = Packed(elem, n, dt)
            dims = (*dims, A.Int(n, call.args[0].span))
            call = replace(call, args=(A.Name(elem, call.args[0].span), A.Tuple(tuple(dims), call.args[1].span),
                                       *call.args[2:]))
            self.storages[target.id] = _Storage(elem, tuple(dims), "local")
            return replace(s, value=call)
        self.storages[target.id] = _Storage(dt, tuple(dims), call.func_name or "local",
                                            layout=call.kwarg("layout") is not None)
        return s

    def bind(self, s: A.Assign, target: A.Name, src: _Parts) -> list[A.Stmt]:
        """`v = <packed value>`: v is a register array of the parts (declared once, at the top)."""
        info = src.info
        name = target.id
        known = self.vectors.get(name)
        if known is None:
            if name in self.storages or name in self.views or name in self.vector_arrays:
                raise _err(f"'{name}' is a buffer; it cannot hold a {info.type} value", target)
            self.vectors[name] = info
            self._hoist(name, info, s.span)
        elif (known.part, known.n) != (info.part, info.n):
            raise _err(f"'{name}' holds {known.n} {known.part} elements ({known.type}); it cannot also hold "
                       f"{info.n} {info.part} elements ({info.type})", s.value)
        elif known.type != info.type:
            self.vectors[name] = replace(known, type=info.type)
        out: list[A.Stmt] = []
        if any(_names_in(p, name) for p in src.items):  # v = perm(v, ...): read every part before writing
            tmp = self._fresh(f"{name}_old")
            self._hoist(tmp, info, s.span)
            out += self._moves(self._register(tmp, info, s.span), self._register(name, info, s.span), s.span)
            at = src.at
            src = _Parts(info, tuple(self._rename(p, name, tmp) for p in src.items),
                         None if at is None else lambda j: self._rename(at(j), name, tmp))
        return out + self._moves(self._register(name, info, s.span), src, s.span)

    def store(self, s: A.Assign, target: A.Subscript, value: A.Expr, src: _Parts | None) -> list[A.Stmt]:
        """A packed value into a row (`S[r] = v`) or a view element (`Vw[n, c] = v`), part by part."""
        dst = self._location(target)
        assert dst is not None
        if src is None:
            if dst.info.n == 1:  # a scalar view element
                return [replace(s, target=dst.items[0], value=self.expr(value))]
            raise _err(f"{self._describe(target)} holds {dst.info.n} {dst.info.part} elements ({dst.info.type}): "
                       f"store a packed value of as many (pack, bitcast, perm, a vector load)", value)
        self._same_parts(dst.info, src.info, value)
        return self._moves(dst, src, s.span)

    def store_vec(self, s: A.ExprStmt, call: A.Call) -> list[A.Stmt]:
        """`store_vec(B[i, c], v)`: the parts of v into B[i, c], B[i, c + 1], ..."""
        if len(call.args) != 2 or call.kwargs:
            raise _err("store_vec(B[i, ..., c], value) takes an element reference and a packed value", call)
        src = self.vector(call.args[1])
        if src is None:
            raise _err("the value of store_vec must be a packed value (pack, bitcast, perm, a vector load)",
                       call.args[1])
        dst = self._run(call.args[0], src.info.n, "store_vec", src.info.type)
        self._same_parts(dst.info, src.info, call.args[1])
        return self._moves(dst, src, s.span)

    def _moves(self, dst: _Parts, src: _Parts, sp) -> list[A.Stmt]:
        """dst[j] = src[j] for every part: one loop when both are formulas of j, else one statement each."""
        if dst.at is not None and src.at is not None and src.info.n > 1:
            first = dst.items[0]
            owner = first.value.id if isinstance(first, A.Subscript) and isinstance(first.value, A.Name) else "v"
            j = A.Name(self._fresh(f"{owner}_part"), sp)  # shown in counterexamples: `a_part=2`
            rng = A.Call(A.Name("range", sp), (A.Int(src.info.n, sp),), (), sp)
            return [A.For(j.id, rng, (A.Assign(dst.at(j), src.at(j), sp),), sp)]
        return [A.Assign(d, v, sp) for d, v in zip(dst.items, src.items)]

    def _hoist(self, name: str, info: Packed, sp) -> None:
        self.hoisted.append(A.Assign(A.Name(name, sp), A.Call(A.Name("local", sp), (
            A.Name(info.part, sp), A.Tuple((A.Int(info.n, sp),), sp)), (), sp), sp))

    @staticmethod
    def _register(name: str, info: Packed, sp) -> _Parts:
        return _uniform(info, lambda j: A.Subscript(A.Name(name, sp), (j,), sp), sp)

    def view(self, target: A.Name, call: A.Call) -> None:
        """`V = view(S, dtype, shape[, layout=L])`: a second typed layout of shared buffer S. Element
        c of V holds the k parts at S's storage offsets k * L(c) + j, where k is how many of S's
        elements one V element spans."""
        if len(call.args) != 3 or any(kw.name != "layout" for kw in call.kwargs):
            raise _err("view(buffer, dtype, shape[, layout=L]) expected", call)
        base, dt = call.args[0], call.args[1]
        if not isinstance(base, A.Name) or base.id not in self.storages \
                or self.storages[base.id].space != "shared" or self.storages[base.id].layout:
            raise _err("the first argument of view must be a shared buffer declared without a layout (a view "
                       "addresses its storage in element order)", base)
        st = self.storages[base.id]
        info = type_info(dt.id) if isinstance(dt, A.Name) else None
        if info is None:
            raise _err(f"unknown element type for view; expected a scalar ({', '.join(sorted(DTYPES))}) or a "
                       f"vector type such as bf16x2", dt)
        elem, count = info
        size, part = count * DTYPE_BYTES[elem], DTYPE_BYTES[st.dtype]
        if elem != st.dtype and not (elem in WORD_ELEMENTS and st.dtype not in WORD_ELEMENTS):
            raise _err(self._reinterprets(st.dtype, elem, dt.id), dt)
        if size % part:
            raise _err(f"a {dt.id} element ({size} bytes) does not cover whole {st.dtype} elements", dt)
        shape = _shape(call.args[2], "a view")
        dims = tuple(_int(d, f"an extent of {base.id}") for d in st.dims)
        k = size // part
        total = 1
        for d in shape:
            total *= d
        storage_total = 1
        for d in dims:
            storage_total *= d
        if total * k > storage_total:
            raise _err(f"the view holds {total * k} {st.dtype} elements; {base.id} has {storage_total}",
                       call.args[2])
        strides = self._strides(call.kwarg("layout"), shape)
        prefix = _shared_prefix(shape, dims, k) if strides == _strides(shape, col=False) else 0
        self.views[target.id] = _View(base.id, dims, Packed(st.dtype, k, dt.id), shape, strides, prefix)

    def _strides(self, e: A.Expr | None, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A view's element order: row_major (the default) or col_major of its shape. (A swizzled
        vector access is a load_vec/store_vec on a buffer declared with the swizzled layout: its
        addresses then pair by coordinates, which the solver proves at once, where a swizzle
        inside view index arithmetic needs bit-level proofs.)"""
        if e is None:
            return _strides(shape, col=False)
        if isinstance(e, A.Call) and e.func_name in ("row_major", "col_major"):
            dims = tuple(_int(a, "a layout extent") for a in e.args)
            if dims != shape:
                raise _err(f"the view's layout has extents {dims}; its shape is {shape}", e)
            return _strides(shape, col=e.func_name == "col_major")
        raise _err("a view's layout is row_major(...) or col_major(...) of its shape (for a swizzled vector "
                   "access, declare the buffer with the swizzled layout and use load_vec/store_vec)", e)

    # ------------------------------------------------------------ packed values
    def vector(self, e: A.Expr) -> _Parts | None:
        """The parts of a packed value, or None when `e` is not one."""
        if isinstance(e, A.Name) and e.id in self.vectors:
            return self._register(e.id, self.vectors[e.id], e.span)
        if isinstance(e, A.Subscript):
            loc = self._location(e)
            return loc if loc is not None and loc.info.n > 1 else None
        if not isinstance(e, A.Call):
            return None
        name = e.func_name
        if name == "pack":
            return self.pack(e)
        if name == "bitcast":
            return self.bitcast(e)
        if name in ("perm", "prmt"):
            return self.permute(e, amd=name == "perm")
        if name == "load_vec":
            return self.load_vec(e)
        return None

    def pack(self, call: A.Call) -> _Parts:
        if len(call.args) < 2 or call.kwargs or not isinstance(call.args[0], A.Name):
            raise _err("pack(vector_type, x0, x1, ...) expected, e.g. pack(bf16x2, lo, hi)", call)
        vec = vector_type(call.args[0].id)
        if vec is None:
            raise _err("the first argument of pack must be a vector type such as bf16x2 or fp8x4", call.args[0])
        elem, n = vec
        if len(call.args) - 1 != n:
            raise _err(f"pack({call.args[0].id}, ...) takes {n} elements, not {len(call.args) - 1}", call)
        return _Parts(Packed(elem, n, call.args[0].id), tuple(self.expr(a) for a in call.args[1:]))

    def bitcast(self, call: A.Call) -> _Parts:
        if len(call.args) != 2 or call.kwargs or not isinstance(call.args[1], A.Name):
            raise _err("bitcast(value, dtype) expected", call)
        src = self.vector(call.args[0])
        if src is None:
            raise _err("bitcast takes a packed value (pack, a vector load, perm, a view element, a register "
                       "vector)", call.args[0])
        info = src.info
        dt = call.args[1]
        t = type_info(dt.id)
        if t is None:
            raise _err("unknown type for bitcast; expected a scalar or vector type such as u32 or bf16x2", dt)
        elem, count = t
        size = count * DTYPE_BYTES[elem]
        if size != info.nbytes:
            raise _err(f"bitcast to {dt.id} ({size} bytes) of a {info.type} value ({info.nbytes} bytes)", call)
        if elem == info.part or elem in WORD_ELEMENTS:  # a word keeps the elements it holds
            return replace(src, info=replace(info, type=dt.id))
        raise _err(self._reinterprets(info.part, elem, dt.id), dt)

    def permute(self, call: A.Call, amd: bool) -> _Parts:
        """`perm(a, b, sel)` (v_perm_b32: bytes 0-3 are b's, 4-7 a's; selector byte i picks result
        byte i, 12 gives 0x00) and `prmt(a, b, sel)` (prmt.b32: bytes 0-3 are a's, 4-7 b's;
        selector nibble i picks result byte i)."""
        name = "perm" if amd else "prmt"
        if len(call.args) != 3 or call.kwargs:
            raise _err(f"{name}(a, b, selector) expected", call)
        srcs = []
        for a in call.args[:2]:
            v = self.vector(a)
            if v is None or v.info.nbytes != 4:
                raise _err(f"the operands of {name} are 4-byte packed values (a u32 word, bf16x2, fp8x4)", a)
            srcs.append(v)
        (ia, pa), (ib, pb) = ((v.info, v.items) for v in srcs)
        if ia.part != ib.part:
            raise _err(f"{name} mixes {ia.part} and {ib.part} elements", call)
        sel_e = call.args[2]
        sel = _int(sel_e, f"the selector of {name}")
        if not 0 <= sel < (1 << 32 if amd else 1 << 16):
            raise _err(f"the selector of {name} must lie in [0, 0x{(1 << 32 if amd else 1 << 16) - 1:x}]", sel_e)
        low, high = (pb, pa) if amd else (pa, pb)
        psize = DTYPE_BYTES[ia.part]
        per_word = 4 // psize

        def source(byte: int) -> tuple[int, int, int]:
            return byte // 4, (byte % 4) // psize, byte % psize  # (word, its part, byte in the part)

        picked: list[tuple[int, int, int] | None] = []  # per result byte: its source byte, or zero
        for i in range(4):
            s = (sel >> (8 * i)) & 0xFF if amd else (sel >> (4 * i)) & 0xF
            if s < 8:
                picked.append(source(s))
            elif amd and s == 12:
                picked.append(None)
            else:
                what = "0xff" if amd and s > 12 else "a sign-replicated byte"
                raise _err(f"byte {i} of the selector (0x{s:x}) gives {what}, which is not an element: not "
                           f"modelled", sel_e)
        out = []
        for h in range(per_word):
            run = picked[h * psize:(h + 1) * psize]
            if all(r is None for r in run):
                out.append(A.Float(0.0, call.span))
                continue
            first = run[0]
            if first is None or any(r != (first[0], first[1], j) for j, r in enumerate(run)):
                raise _err(f"result bytes {h * psize}..{h * psize + psize - 1} of selector 0x{sel:x} are not "
                           f"one whole {ia.part} element of an operand (an element split is not modelled)", sel_e)
            out.append((low, high)[first[0]][first[1]])
        return _Parts(Packed(ia.part, per_word, "u32"), tuple(out))

    def load_vec(self, call: A.Call) -> _Parts:
        if len(call.args) != 2 or call.kwargs:
            raise _err("load_vec(B[i, ..., c], n) takes an element reference and a constant count", call)
        n = _int(call.args[1], "the count of load_vec")
        dt = self._dtype(call.args[0])
        if n < 2 or n * DTYPE_BYTES[dt] > MAX_VECTOR_BYTES:
            raise _err(f"load_vec moves 2 or more elements and at most {MAX_VECTOR_BYTES} bytes", call.args[1])
        return self._run(call.args[0], n, "load_vec", f"{dt}x{n}")

    # ------------------------------------------------------------ locations
    def _location(self, e: A.Subscript) -> _Parts | None:
        """A view element or a partial index (a row): what it holds and its parts' element
        references; None for an ordinary element reference."""
        if not isinstance(e.value, A.Name):
            return None
        name = e.value.id
        if name in self.views:
            return self._view_parts(self.views[name], e)
        st = self.storages.get(name)
        if st is None or len(e.indices) != len(st.dims) - 1:
            return None
        last = const_int(st.dims[-1], {})
        if last is None:
            return None  # not a row: the lowering reports the missing index
        info = self.vector_arrays.get(name) or Packed(st.dtype, last, f"{st.dtype}x{last}")
        if st.space != "local" and info.nbytes not in MEMORY_VECTOR_BYTES:
            raise _err(f"a row of {name} is {info.nbytes} bytes; a vector load or store of {st.space} memory "
                       f"moves 4, 8 or 16", e)
        idx = tuple(self.expr(i) for i in e.indices)
        return _uniform(info, lambda j: A.Subscript(e.value, (*idx, j), e.span, lanes=last), e.span)

    def _view_parts(self, v: _View, e: A.Subscript) -> _Parts:
        if len(e.indices) != len(v.shape):
            raise _err(f"the view has {len(v.shape)} dimensions; {len(e.indices)} indices given", e)
        sp = e.span
        p = v.prefix
        lead = tuple(self.expr(i) for i in e.indices[:p])
        off: A.Expr = A.Int(0, sp)
        for i, stride in zip(e.indices[p:], v.strides[p:]):
            off = _add(off, _mul(stride, self.expr(i), sp), sp)
        k = v.packed.n
        base = _mul(k, off, sp)
        return _uniform(v.packed, lambda j: A.Subscript(
            A.Name(v.storage, sp), (*lead, *_unravel(_add(base, j, sp), v.dims[p:], sp)), sp, lanes=k), sp)

    def _run(self, ref: A.Expr, n: int, what: str, shown: str) -> _Parts:
        """B[i, ..., c + j] for j < n: n consecutive elements along B's last dimension."""
        if not isinstance(ref, A.Subscript) or not isinstance(ref.value, A.Name) \
                or ref.value.id not in self.storages or ref.value.id in self.vector_arrays:
            raise _err(f"the first argument of {what} must be an element of a tensor, shared or local buffer",
                       ref)
        st = self.storages[ref.value.id]
        if len(ref.indices) != len(st.dims):
            raise _err(f"{ref.value.id} has {len(st.dims)} dimensions; {len(ref.indices)} indices given", ref)
        if st.space != "local" and n * DTYPE_BYTES[st.dtype] not in MEMORY_VECTOR_BYTES:
            raise _err(f"a vector access of {st.space} memory moves 4, 8 or 16 bytes, not "
                       f"{n * DTYPE_BYTES[st.dtype]}", ref)
        idx = tuple(self.expr(i) for i in ref.indices)
        sp = ref.span
        return _uniform(Packed(st.dtype, n, shown),
                        lambda j: A.Subscript(ref.value, (*idx[:-1], _add(idx[-1], j, sp)), sp, lanes=n), sp)

    def _dtype(self, ref: A.Expr) -> str:
        if isinstance(ref, A.Subscript) and isinstance(ref.value, A.Name) and ref.value.id in self.storages:
            return self.storages[ref.value.id].dtype
        raise _err("an element of a tensor, shared or local buffer expected", ref)

    # ------------------------------------------------------------ scalar positions
    def expr(self, node):
        """`node` (a statement or expression with no packed value of its own) with every scalar view
        element replaced by its storage element; a packed construct here is misplaced."""
        views = False
        for n in walk(node, into_lambdas=False):
            if isinstance(n, A.Call) and n.func_name in CALLS:
                what = "a statement of its own" if n.func_name == "store_vec" else \
                    "assigned to a name" if n.func_name == "view" else "a packed value: assign it to a name or store it"
                raise _err(f"{n.func_name}(...) is {what}", n)
            views = views or (isinstance(n, A.Name) and n.id in self.views)
        return rewrite(node, self._scalar_view) if views else node

    def _scalar_view(self, n):
        if isinstance(n, A.Subscript) and isinstance(n.value, A.Name) and n.value.id in self.views:
            parts = self._view_parts(self.views[n.value.id], n)
            info = parts.info
            if info.n != 1:
                raise _err(f"{self._describe(n)} holds {info.n} {info.part} elements ({info.type}): assign it to "
                           f"a name, or bitcast it", n)
            return parts.items[0]
        if isinstance(n, A.Name) and n.id in self.views:
            raise _err(f"'{n.id}' is a view: index it", n)
        return None

    # ------------------------------------------------------------ helpers
    def _same_parts(self, want: Packed, got: Packed, node) -> None:
        if (want.part, want.n) != (got.part, got.n):
            raise _err(f"stores {got.n} {got.part} elements ({got.type}) where {want.n} {want.part} elements "
                       f"({want.type}) are held", node)

    @staticmethod
    def _reinterprets(have: str, want: str, shown: str) -> str:
        if DTYPE_BYTES[have] == DTYPE_BYTES[want]:
            return (f"{shown} would reinterpret {have} elements as {want}: not modelled (bitcast to u32/i32 "
                    f"keeps the elements; convert values with arithmetic)")
        return f"{shown} would split or merge {have} elements into {want}: not modelled"

    @staticmethod
    def _describe(e: A.Subscript) -> str:
        return f"'{e.value.id}[...]'" if isinstance(e.value, A.Name) else "the element"

    def _fresh(self, base: str) -> str:
        if self._taken is None:
            self._taken = {n.id for s in self.kernel.body for n in walk(s) if isinstance(n, A.Name)}
        name = base
        while name in self._taken:
            name += "_"
        self._taken.add(name)
        return name

    @staticmethod
    def _rename(e: A.Expr, old: str, new: str) -> A.Expr:
        return rewrite(e, lambda n: A.Name(new, n.span) if isinstance(n, A.Name) and n.id == old else None)


def desugar_packed(module: A.Module) -> A.Module:
    """Every kernel with its packed values, views and vector accesses rewritten into element moves
    (a kernel without any comes back as it was)."""
    kernels = []
    for k in module.kernels:
        r = _Rewriter(k)
        body = r.block(k.body)
        kernels.append(k if body is k.body and not r.hoisted else replace(k, body=tuple(r.hoisted) + body))
    return replace(module, kernels=tuple(kernels))
