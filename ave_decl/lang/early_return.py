"""Early `return` in a kernel: the statements after it run only for the threads that did not
return, so it is rewritten, right after inlining, into the `if` it means:

    if r >= M:                 if r >= M:
        return          ->         pass
    rest                       else:
                                   rest

Supported: an `if` at the top level of the kernel (or of the rest moved into such an arm, so a
kernel may guard several times) one of whose arms ends with `return`, the other arm holding no
`return`; or an unconditional `return` (what follows is unreachable and dropped). The rest moves
into the arm that did not return, so nothing is copied. Other places (a `return` in a nested
`if`, in an `elif` chain, not at the end of its arm, in a loop) are refused with a located error:
their rewrite would copy the rest into several arms (a `tag` or a buffer declaration twice) or
grow exponentially.
"""
from __future__ import annotations

from dataclasses import replace

from . import ast as A
from .depth import walk
from .errors import FrontEndError


def _returns(node) -> list[A.Return]:
    """The `return` statements in a statement or a block, in source order."""
    nodes = node if isinstance(node, tuple) else (node,)
    return [n for x in nodes for n in walk(x, into_lambdas=False) if isinstance(n, A.Return)]


def _refuse(r: A.Return, why: str) -> FrontEndError:
    return FrontEndError(f"this early return is not supported: {why} (write `if c: return` at the top level of the "
                         f"kernel)", r.span)


def _arm(body: tuple[A.Stmt, ...]) -> bool:
    """Whether the arm ends with a `return` (its only one); refuses any other return in it."""
    found = _returns(body)
    if not found:
        return False
    last = body[-1]
    if not isinstance(last, A.Return) or len(found) > 1:
        inner = next(r for r in found if r is not last)
        raise _refuse(inner, "a return inside a nested block of an `if` arm")
    return True


def _block(body: tuple[A.Stmt, ...]) -> tuple[A.Stmt, ...]:
    out: list[A.Stmt] = []
    for i, s in enumerate(body):
        if isinstance(s, A.Return):
            return tuple(out)  # the rest is unreachable
        if isinstance(s, A.For):
            if found := _returns(s):
                raise FrontEndError("return inside a loop is not supported: it would end the loop for some threads "
                                    "only (guard the loop's body instead)", found[0].span)
            out.append(s)
            continue
        if not isinstance(s, A.If) or not _returns(s):
            out.append(s)
            continue
        then_returns, else_returns = _arm(s.body), _arm(s.orelse)
        rest = _block(body[i + 1:])
        then = s.body[:-1] if then_returns else s.body + rest
        orelse = s.orelse[:-1] if else_returns else s.orelse + rest
        out.append(replace(s, body=then or (A.Pass(s.span),), orelse=orelse))
        return tuple(out)
    return tuple(out)


def desugar_returns(module: A.Module) -> A.Module:
    """Every kernel with its early returns rewritten into the `if`s they mean."""
    kernels = []
    for k in module.kernels:
        if any(_returns(s) for s in k.body):
            k = replace(k, body=_block(k.body) or (A.Pass(k.span),))
        kernels.append(k)
    return replace(module, kernels=tuple(kernels))
