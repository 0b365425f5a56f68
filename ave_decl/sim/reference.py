"""The reference a kernel declares (`reference="C = A @ B"`), evaluated over numpy, and the comparison."""
from __future__ import annotations

import ast as pyast

import numpy as np

from ..lang import ast as A
from ..lang.errors import FrontEndError


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
