"""Early `return` in a kernel: the statements after it run only for the threads that did not
return, so it is rewritten, right after inlining, into the `if` it means:

    if r >= M:                 if r >= M:
        return          ->         pass
    rest                       else:
                                   rest

A `return` ends the thread, so the rest of the statement list moves into the arm that did not
return (never copied into both); statements after an unconditional `return` are unreachable and
dropped. A `return` inside a loop would end the loop for some threads only and is refused.
"""
from __future__ import annotations

from dataclasses import replace

from . import ast as A
from .depth import walk
from .errors import FrontEndError


def _block(body: tuple[A.Stmt, ...]) -> tuple[tuple[A.Stmt, ...], bool]:
    """The block without returns, and whether every path through it returns."""
    out: list[A.Stmt] = []
    for i, s in enumerate(body):
        if isinstance(s, A.Return):
            return tuple(out), True
        if isinstance(s, A.For):
            for n in walk(s, into_lambdas=False):
                if isinstance(n, A.Return):
                    raise FrontEndError("return inside a loop is not supported: it would end the loop for some "
                                        "threads only (guard the loop's body instead)", n.span)
            out.append(s)
            continue
        if not isinstance(s, A.If) or not any(isinstance(n, A.Return) for n in walk(s, into_lambdas=False)):
            out.append(s)
            continue
        then, then_returns = _block(s.body)
        orelse, else_returns = _block(s.orelse)
        rest, rest_returns = _block(body[i + 1:])
        if not then_returns:
            then = then + rest
        if not else_returns:
            orelse = orelse + rest
        out.append(replace(s, body=then or (A.Pass(s.span),), orelse=orelse))
        return tuple(out), (then_returns or rest_returns) and (else_returns or rest_returns)
    return tuple(out), False


def desugar_returns(module: A.Module) -> A.Module:
    """Every kernel with its early returns rewritten into the `if`s they mean."""
    kernels = []
    for k in module.kernels:
        if any(isinstance(n, A.Return) for s in k.body for n in walk(s, into_lambdas=False)):
            k = replace(k, body=_block(k.body)[0] or (A.Pass(k.span),))
        kernels.append(k)
    return replace(module, kernels=tuple(kernels))
