"""The reference a kernel declares (`reference="C = A @ B"`), evaluated over numpy, and the comparison.

The text was parsed and type-checked by `lang/reference.py` (our own grammar, never Python);
this module walks that AST over float64 numpy arrays. Only the operations below exist: a name is
a tensor or size parameter, a call is one of `lang.reference.FUNCTIONS`.
"""
from __future__ import annotations

import numpy as np

from ..lang import ast as A
from ..lang import reference as R
from .state import SimulationError


def reference_of(kernel: A.Kernel) -> R.Reference | None:
    """The kernel's reference, parsed and checked (FrontEndError, exit 3, on a bad one)."""
    return R.reference_of(kernel)


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


_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide,
           "%": np.mod, "**": np.power, "@": np.matmul, "==": np.equal, "!=": np.not_equal, "<": np.less,
           "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
_UNARY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt, "abs": np.abs,
          "tanh": np.tanh}
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}


def softmax(x: np.ndarray, axis: int | tuple[int, ...] = -1) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) along `axis` (numerically stable)."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


class _Evaluator:
    """Walks a reference AST; every numpy failure becomes a SimulationError at the node's span."""

    def __init__(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]):
        self.tensors = {k: np.asarray(v).astype(np.float64) for k, v in inputs.items()}
        self.sizes = sizes

    def value(self, n):
        try:
            return self._value(n)
        except SimulationError:
            raise
        except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError, MemoryError) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SimulationError(f"reference: cannot evaluate at these sizes: {msg[:200]}", n.span) from None

    def _value(self, n):
        if isinstance(n, R.Num):
            return np.float64(n.value)
        if isinstance(n, R.Name):
            if n.type == R.TENSOR:
                if n.id not in self.tensors:
                    raise SimulationError(f"reference: no input tensor {n.id}", n.span)
                return self.tensors[n.id]
            if n.id not in self.sizes:
                raise SimulationError(f"reference: no value for size {n.id}", n.span)
            return np.float64(self.sizes[n.id])
        if isinstance(n, R.Unary):
            v = self.value(n.operand)
            return np.negative(v) if n.op == "-" else v
        if isinstance(n, R.Binary):
            out = _BINARY[n.op](self.value(n.left), self.value(n.right))
            return out.astype(np.float64) if n.op in ("==", "!=", "<", "<=", ">", ">=") else out
        if isinstance(n, R.Index):
            base = self.value(n.base)
            return base[tuple(self._item(i) for i in n.items)]
        if isinstance(n, R.Call):
            return self._call(n)
        raise SimulationError(f"reference: cannot evaluate {type(n).__name__}", n.span)

    def _int(self, n) -> int:
        v = self.value(n)
        if np.ndim(v) != 0 or not np.isfinite(v) or v != np.round(v):
            raise SimulationError("reference: expected an integer", n.span)
        return int(v)

    def _item(self, i):
        if isinstance(i, R.Slice):
            return slice(*(self._int(x) if x is not None else None for x in (i.lo, i.hi, i.step)))
        if i.type == R.NUMBER:
            return self._int(i)
        v = np.asarray(self.value(i))  # an index tensor: a gather
        if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)):
            raise SimulationError("reference: an index tensor must hold integers", i.span)
        return v.astype(np.intp)

    def _call(self, n: R.Call):
        f, args = n.func, n.args
        if f in _UNARY:
            return _UNARY[f](self.value(args[0]))
        if f in ("maximum", "minimum"):
            return (np.maximum if f == "maximum" else np.minimum)(self.value(args[0]), self.value(args[1]))
        if f == "where":
            return np.where(self.value(args[0]) != 0, self.value(args[1]), self.value(args[2]))
        if f in _REDUCE:
            return _REDUCE[f](self.value(args[0]), axis=args[1].value, keepdims=args[2].value)
        if f == "softmax":
            return softmax(self.value(args[0]), args[1].value)
        if f == "transpose":
            return np.transpose(self.value(args[0]), args[1].value)
        if f == "attention":
            return attention_reference(*(self.value(a) for a in args[:3]), causal=args[3].value)
        if f == "moe":
            return moe_reference(*(self.value(a) for a in args[:5]), self._int(args[5]), self._int(args[6]))
        raise SimulationError(f"reference: unknown function {f}", n.span)


def evaluate_reference(ref: R.Reference, inputs: dict[str, np.ndarray], sizes: dict[str, int],
                       shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The reference expression over the input tensors (in float64) and the sizes.

    Overflow, division by zero and invalid values give inf/nan as in numpy (the comparison then
    reports the difference); they are not warnings on stderr. With `shape` (the output tensor's),
    a result of another shape is the reference's fault, not the kernel's: a located error (exit 3)
    like any expression that cannot be evaluated at these sizes."""
    with np.errstate(all="ignore"):
        value = np.asarray(_Evaluator(inputs, sizes).value(ref.expr), dtype=np.float64)
    if shape is not None and value.shape != tuple(shape):
        raise SimulationError(f"reference: the expression has shape {value.shape}, but {ref.output} has shape "
                              f"{tuple(shape)} at these sizes", ref.expr.span)
    return value


def compare(out: np.ndarray, ref: np.ndarray, tol: float = 1e-3, where: np.ndarray | None = None) -> dict:
    """Max abs error and max error relative to the reference's magnitude (float32 accumulation).
    `where` (a mask of out's shape): compare only those elements (a launch of some blocks writes
    only part of the output; the rest holds the untouched initial values)."""
    if out.shape != ref.shape:
        return {"ok": False, "max_abs": float("inf"), "rel": float("inf"), "tol": tol,
                "why": f"shape {out.shape} vs reference {ref.shape}"}
    with np.errstate(all="ignore"):  # inf - inf in an output or the reference is a difference, not a warning
        return _compare(out, ref, tol, where)


def _compare(out: np.ndarray, ref: np.ndarray, tol: float, where: np.ndarray | None) -> dict:
    diff = np.abs(out.astype(np.float64) - ref)
    # the scale is the whole reference's, as for a run of every block: the same values pass or fail
    scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    if where is not None:
        diff = diff[where]  # (flattened: the worst index is mapped back below)
    rel = float(diff.max() / scale) if diff.size else 0.0
    worst: tuple = ()
    if diff.size:
        at = int(diff.argmax())
        worst = np.unravel_index(at, out.shape) if where is None else tuple(ix[at] for ix in np.nonzero(where))
    return {"ok": rel <= tol, "max_abs": float(diff.max()) if diff.size else 0.0, "rel": rel, "tol": tol,
            "worst_index": [int(i) for i in worst],
            "mismatched": int((diff > tol * scale).sum()), "elements": int(diff.size)}
