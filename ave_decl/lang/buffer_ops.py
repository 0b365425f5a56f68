"""AMD buffer operations with their real semantics: a buffer resource names a tensor and a byte
range (`num_records`); a load outside the range returns 0 and a store outside it is dropped
(the hardware's range check). Each operation is rewritten, right after inlining, into the
predicated access it means (lang/masked.py then makes it the guarded access every consumer
sees):

    r = make_rsrc(A, M * 4)                  ->   r_num_bytes = M * 4
    x = raw_buffer_load(r, off)              ->   x = load(A[off // 4], mask=off >= 0 and off < r_num_bytes,
                                                            other=0.0)
    raw_buffer_store(r, off, v)              ->   store(A[off // 4], v, mask=...)

Offsets are in bytes (`voffset`, plus an optional `soffset`); the element is offset // element
size, unravelled row-major over the tensor's dimensions. A range larger than the tensor lets an
access through (the hardware reads past the tensor): ave/global-bounds then reports it. The
default of a masked-off load is a zero value (docs/language.md, "Zero tags").
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..hw.dtypes import DTYPE_BYTES
from . import ast as A
from .depth import walk
from .errors import FrontEndError
from .masked import substitute

NAMES = ("make_rsrc", "raw_buffer_load", "raw_buffer_store", "buffer_load_lds", "s_waitcnt")
LDS_DWORD = 4  # bytes a lane of a direct-to-LDS buffer load moves


@dataclass(frozen=True)
class _Resource:
    tensor: str
    dtype: str
    dims: tuple[A.Expr, ...]
    num_bytes: str  # the index name that holds the resource's byte range


def _uses(module: A.Module) -> bool:
    return any(isinstance(n, A.Call) and n.func_name in NAMES for k in module.kernels for s in k.body
               for n in walk(s, into_lambdas=False))


def tensor_params(k: A.Kernel) -> dict[str, tuple[str, tuple[A.Expr, ...]]]:
    """Tensor parameter -> (element type, dimensions), from `Tensor[dtype, (d0, d1, ...)]`."""
    out = {}
    for p in k.params:
        ann = p.annotation
        if isinstance(ann, A.Subscript) and isinstance(ann.value, A.Name) and ann.value.id == "Tensor" \
                and len(ann.indices) >= 2 and isinstance(ann.indices[0], A.Name):
            dims = ann.indices[1].elts if isinstance(ann.indices[1], A.Tuple) else (ann.indices[1],)
            out[p.name] = (ann.indices[0].id, tuple(dims))
    return out


def _element(res: _Resource, offset: A.Expr, span) -> tuple[A.Subscript, A.Expr]:
    """The tensor element a byte offset names (row-major), and the range check."""
    size = DTYPE_BYTES[res.dtype]
    flat: A.Expr = A.BinOp("//", offset, A.Int(size, span), span) if size != 1 else offset
    coords: list[A.Expr] = []
    rest = flat
    for i, d in enumerate(reversed(res.dims)):
        last = i == len(res.dims) - 1
        coords.append(rest if last else A.BinOp("%", rest, d, span))
        if not last:
            rest = A.BinOp("//", rest, d, span)
    ref = A.Subscript(A.Name(res.tensor, span), tuple(reversed(coords)), span)
    inside = A.BoolOp("and", (A.BinOp(">=", offset, A.Int(0, span), span),
                              A.BinOp("<", offset, A.Name(res.num_bytes, span), span)), span)
    return ref, inside


def _offset(call: A.Call, first: int) -> A.Expr:
    """voffset (+ soffset) of a buffer access."""
    off = call.args[first]
    soff = call.kwarg("soffset")
    if len(call.args) > first + 1 and call.func_name == "raw_buffer_load":
        soff = call.args[first + 1]
    return A.BinOp("+", off, soff, call.span) if soff is not None else off


class _Rewriter:
    def __init__(self, kernel: A.Kernel):
        self.tensors = tensor_params(kernel)
        # shared buffers declared in the kernel (row-major: LDS byte addresses are their offsets):
        # name -> (element type, dimensions)
        self.shared = {s.target.id: (s.value.args[0].id, tuple(s.value.args[1].elts))
                       for st in kernel.body for s in walk(st, into_lambdas=False)
                       if isinstance(s, A.Assign) and isinstance(s.target, A.Name) and isinstance(s.value, A.Call)
                       and s.value.func_name == "shared" and len(s.value.args) >= 2
                       and isinstance(s.value.args[0], A.Name) and isinstance(s.value.args[1], A.Tuple)
                       and s.value.kwarg("layout") is None}
        self.taken = {n.id for s in kernel.body for n in walk(s) if isinstance(n, A.Name)}

    def block(self, body: tuple[A.Stmt, ...], resources: dict[str, _Resource]) -> tuple[A.Stmt, ...]:
        resources = dict(resources)  # a resource made in a block is known in it, after it is made
        out: list[A.Stmt] = []
        for s in body:
            if isinstance(s, A.Assign) and isinstance(s.value, A.Call) and s.value.func_name == "make_rsrc":
                out.append(self.make(s, resources))
            elif isinstance(s, A.For):
                out.append(replace(s, body=self.block(s.body, resources)))
            elif isinstance(s, A.If):
                out.append(replace(s, body=self.block(s.body, resources), orelse=self.block(s.orelse, resources)))
            elif isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name == "raw_buffer_store":
                out.append(self.store(s, s.expr, resources))
            elif isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name == "buffer_load_lds":
                out.extend(self.load_lds(s.expr, resources))
            elif isinstance(s, A.ExprStmt) and isinstance(s.expr, A.Call) and s.expr.func_name == "s_waitcnt":
                out.append(self.waitcnt(s, s.expr))
            else:
                out.append(self.loads(s, resources))
        return tuple(out)

    def load_lds(self, call: A.Call, resources: dict[str, _Resource]) -> list[A.Stmt]:
        """`buffer_load_lds(S, m0, rsrc, voffset[, soffset])`: each lane copies one dword of the
        buffer, asynchronously, to shared buffer S at byte address m0 + lane * 4 (one copy per
        element of S the dword holds); out of range it writes 0. Each such load is its own copy
        group, as each is one vector-memory operation for `s_waitcnt(vmcnt=n)`."""
        if not 4 <= len(call.args) <= 5 or call.kwargs:
            raise FrontEndError("buffer_load_lds(lds, m0, rsrc, voffset[, soffset]) expected", call.span)
        lds, m0 = call.args[0], call.args[1]
        if not isinstance(lds, A.Name) or lds.id not in self.shared:
            raise FrontEndError("the first argument of buffer_load_lds must be a shared buffer declared without a "
                                "layout (the load writes LDS byte addresses: row-major offsets)", lds.span)
        res = self._resource(call, 2, resources)
        lds_dtype, lds_dims = self.shared[lds.id]
        if DTYPE_BYTES[lds_dtype] != DTYPE_BYTES[res.dtype] or LDS_DWORD % DTYPE_BYTES[res.dtype]:
            raise FrontEndError(f"buffer_load_lds copies dwords between elements of one size: {res.tensor} holds "
                                f"{res.dtype}, {lds.id} holds {lds_dtype}", call.span)
        sp = call.span
        offset = A.BinOp("+", call.args[3], call.args[4], sp) if len(call.args) == 5 else call.args[3]
        lane = A.Call(A.Name("lane_id", sp), (), (), sp)
        address = A.BinOp("+", m0, A.BinOp("*", lane, A.Int(LDS_DWORD, sp), sp), sp)
        dst_res = _Resource(lds.id, lds_dtype, lds_dims, res.num_bytes)
        in_range = A.BoolOp("and", (A.BinOp(">=", offset, A.Int(0, sp), sp),
                                    A.BinOp("<=", A.BinOp("+", offset, A.Int(LDS_DWORD, sp), sp),
                                            A.Name(res.num_bytes, sp), sp)), sp)
        copies, zeros = [], []
        esize = DTYPE_BYTES[res.dtype]
        for j in range(LDS_DWORD // esize):
            src, _ = _element(res, A.BinOp("+", offset, A.Int(j * esize, sp), sp), sp)
            dst, _ = _element(dst_res, A.BinOp("+", address, A.Int(j * esize, sp), sp), sp)
            copies.append(A.ExprStmt(A.Call(A.Name("async_copy", sp), (dst, src), (), sp), sp))
            zeros.append(A.Assign(dst, A.Float(0.0, sp), sp))
        commit = A.ExprStmt(A.Call(A.Name("async_commit", sp), (), (), sp), sp)
        return [A.If(in_range, tuple(copies), tuple(zeros), sp), commit]

    def waitcnt(self, s: A.ExprStmt, call: A.Call) -> A.Stmt:
        """`s_waitcnt(vmcnt=n)`: at most n vector-memory operations of this lane outstanding, i.e.
        every direct-to-LDS load but the n most recent landed (`async_wait(n)`). Register loads are
        complete at once in Ave, so not counting them only makes the wait weaker: sound.
        `lgkmcnt=` (LDS, scalar memory) waits for nothing Ave models as pending."""
        if call.args or any(kw.name not in ("vmcnt", "lgkmcnt", "expcnt") for kw in call.kwargs):
            raise FrontEndError("s_waitcnt takes keywords: vmcnt=, lgkmcnt=, expcnt=", call.span)
        vm = call.kwarg("vmcnt")
        if vm is None:
            return A.Pass(s.span)
        return A.ExprStmt(A.Call(A.Name("async_wait", call.span), (vm,), (), call.span), s.span)

    def make(self, s: A.Assign, resources: dict[str, _Resource]) -> A.Stmt:
        call = s.value
        assert isinstance(call, A.Call)
        if not isinstance(s.target, A.Name):
            raise FrontEndError("make_rsrc(...) must be assigned to a name", s.target.span)
        if len(call.args) != 2 or call.kwargs:
            raise FrontEndError("make_rsrc(tensor, num_bytes) takes a tensor parameter and its byte range", call.span)
        tensor = call.args[0]
        if not isinstance(tensor, A.Name) or tensor.id not in self.tensors:
            raise FrontEndError("the first argument of make_rsrc must be a tensor parameter of the kernel",
                                tensor.span)
        dtype, dims = self.tensors[tensor.id]
        name = f"{s.target.id}_num_bytes"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        resources[s.target.id] = _Resource(tensor.id, dtype, dims, name)
        return A.Assign(A.Name(name, s.target.span), call.args[1], s.span)

    def _resource(self, call: A.Call, position: int, resources: dict[str, _Resource]) -> _Resource:
        """The buffer resource that argument `position` of the call names."""
        r = call.args[position] if len(call.args) > position else None
        if not isinstance(r, A.Name) or r.id not in resources:
            which = "first" if position == 0 else "third"
            raise FrontEndError(f"the {which} argument of {call.func_name} must be a buffer resource made by "
                                f"make_rsrc(tensor, num_bytes) before it", (r or call).span)
        return resources[r.id]

    def store(self, s: A.ExprStmt, call: A.Call, resources: dict[str, _Resource]) -> A.Stmt:
        if len(call.args) != 3 or any(kw.name != "soffset" for kw in call.kwargs):
            raise FrontEndError("raw_buffer_store(rsrc, voffset, value[, soffset=]) expected", call.span)
        res = self._resource(call, 0, resources)
        ref, inside = _element(res, _offset(call, 1), call.span)
        return A.ExprStmt(A.Call(A.Name("store", call.span), (ref, call.args[2]),
                                 (A.Keyword("mask", inside, call.span),), call.span), s.span)

    def loads(self, s: A.Stmt, resources: dict[str, _Resource]) -> A.Stmt:
        calls = [n for n in walk(s, into_lambdas=False) if isinstance(n, A.Call) and n.func_name in NAMES]
        if not calls:
            return s
        for call in calls:
            if call.func_name != "raw_buffer_load":
                raise FrontEndError(f"{call.func_name}(...) is a statement of its own", call.span)
            if not 2 <= len(call.args) <= 3 or any(kw.name != "soffset" for kw in call.kwargs):
                raise FrontEndError("raw_buffer_load(rsrc, voffset[, soffset]) expected", call.span)
        subst = {}
        for call in calls:
            res = self._resource(call, 0, resources)
            ref, inside = _element(res, _offset(call, 1), call.span)
            subst[id(call)] = A.Call(A.Name("load", call.span), (ref,),
                                     (A.Keyword("mask", inside, call.span),
                                      A.Keyword("other", A.Float(0.0, call.span), call.span)), call.span)
        for call in calls:
            s = substitute(s, call, subst[id(call)])
        return s


def desugar_buffer_ops(module: A.Module) -> A.Module:
    """Every kernel with its buffer resources and buffer loads/stores rewritten into predicated
    accesses (then guarded ones, by lang/masked.py)."""
    if not _uses(module):
        return module
    return replace(module, kernels=tuple(replace(k, body=_Rewriter(k).block(k.body, {})) for k in module.kernels))
