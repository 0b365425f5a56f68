"""The frozen specification of a kernel, and what a candidate changed of it (`ave check
--frozen-spec ORIGINAL`).

An agent that repairs or optimizes a kernel may edit its body, but not what the kernel is
judged by: its signature (name, parameters, launch), its reference and tolerance, its `tag`s,
`assume`s and assertions, nor drop a tensor the original tags. Otherwise the cheapest "fix" of a
failing obligation is to delete or weaken it (reward hacking). The comparison is on ASTs as
`parse_text` returns them (spans and comments never take part), never on text, so reformatting
is not a change and a one-character edit inside an assertion is.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from . import ast as A
from .source import Span

REFERENCE_KWARGS = ("reference", "tolerance")  # the decorator's part that says what the output must be


@dataclass(frozen=True)
class SpecChange:
    """One change of the frozen spec; `span` is where it is (in the candidate, or in the
    original for something removed)."""

    kind: str  # signature | reference | tag | assume | assertion | tagged-tensor
    message: str
    span: Span

    def one_line(self) -> str:
        s = self.span
        return f"{s.path}:{s.line}:{s.col}: error: frozen spec: {self.message}"


def _is_spec_call(e: A.Expr) -> str | None:
    if not isinstance(e, A.Call) or e.func_name is None:
        return None
    name = e.func_name
    if name == "tag":
        return "tag"
    if name == "assume":
        return "assume"
    if name.startswith("assert"):
        return "assertion"
    return None


def spec_statements(k: A.Kernel) -> list[tuple[str, tuple, A.Call]]:
    """(kind, enclosing loops/ifs, call) for every tag/assume/assert statement of the kernel.
    The nesting (loop variables and `if` depth) is part of the key, so moving an assertion out of
    the loop it guards is a change, while editing a loop's bound is not."""
    out: list[tuple[str, tuple, A.Call]] = []

    def visit(body: tuple, ctx: tuple) -> None:
        for s in body:
            if isinstance(s, A.ExprStmt):
                kind = _is_spec_call(s.expr)
                if kind:
                    out.append((kind, ctx, s.expr))  # type: ignore[arg-type]
            elif isinstance(s, A.For):
                visit(s.body, ctx + (("for", s.var),))
            elif isinstance(s, A.If):
                visit(s.body, ctx + (("if", "then"),))
                visit(s.orelse, ctx + (("if", "else"),))

    visit(k.body, ())
    return out


def _tagged_names(k: A.Kernel) -> set[str]:
    return {c.args[0].id for kind, _, c in spec_statements(k)
            if kind == "tag" and c.args and isinstance(c.args[0], A.Name)}


def _defined_names(k: A.Kernel) -> set[str]:
    names = {p.name for p in k.params}

    def visit(body: tuple) -> None:
        for s in body:
            if isinstance(s, A.Assign) and isinstance(s.target, A.Name):
                names.add(s.target.id)
            elif isinstance(s, A.For):
                visit(s.body)
            elif isinstance(s, A.If):
                visit(s.body)
                visit(s.orelse)

    visit(k.body)
    return names


def _decorator(k: A.Kernel, reference: bool) -> dict[str, A.Expr]:
    return {kw.name: kw.value for kw in k.decorator.kwargs if (kw.name in REFERENCE_KWARGS) == reference}


def _unmatched(orig: list, cand: list) -> tuple[list[tuple[str, A.Call]], list[tuple[str, A.Call]]]:
    """(statements of the original without an equal one in the candidate, the candidate's without
    one in the original), as (kind, call), in source order. Equal: the same call AST in the same
    nesting (spans take no part in the equality or hash of an AST node)."""
    left = Counter((ctx, c) for _, ctx, c in cand)
    missing = []
    for kind, ctx, c in orig:
        if left[(ctx, c)] > 0:
            left[(ctx, c)] -= 1
        else:
            missing.append((kind, c))
    extra = []
    for kind, ctx, c in cand:
        if left[(ctx, c)] > 0:
            left[(ctx, c)] -= 1
            extra.append((kind, c))
    return missing, extra


def kernel_changes(orig: A.Kernel, cand: A.Kernel) -> list[SpecChange]:
    """What `cand` changed of `orig`'s frozen spec (empty: nothing)."""
    out: list[SpecChange] = []
    sig_o = (orig.name, orig.params, orig.decorator.args, _decorator(orig, False))
    sig_c = (cand.name, cand.params, cand.decorator.args, _decorator(cand, False))
    if sig_o != sig_c:
        out.append(SpecChange("signature", f"kernel {orig.name}: the signature or launch changed", cand.span))
    if _decorator(orig, True) != _decorator(cand, True):
        out.append(SpecChange("reference", f"kernel {orig.name}: the reference or its tolerance changed",
                              cand.decorator.span))
    missing, extra = _unmatched(spec_statements(orig), spec_statements(cand))
    for kind, o_call in missing:  # paired with an extra statement of its kind: changed in place
        c_call = next((c for k2, c in extra if k2 == kind), None)
        where = f"{o_call.span.path}:{o_call.span.line}:{o_call.span.col}"
        if c_call is not None:
            extra.remove((kind, c_call))
            out.append(SpecChange(kind, f"kernel {orig.name}: this {kind} differs from the original's ({where})",
                                  c_call.span))
        else:
            out.append(SpecChange(kind, f"kernel {orig.name}: the {kind} of the original at {where} is missing",
                                  cand.span))
    out += [SpecChange(kind, f"kernel {orig.name}: an {kind} the original does not have" if kind[0] in "aeiou"
                       else f"kernel {orig.name}: a {kind} the original does not have", c.span) for kind, c in extra]
    for name in sorted(_tagged_names(orig) - _defined_names(cand)):
        out.append(SpecChange("tagged-tensor", f"kernel {orig.name}: the tagged tensor {name} was removed", cand.span))
    return out


def spec_changes(original: A.Module, candidate: A.Module) -> list[SpecChange]:
    """Every change of the frozen spec, kernel by kernel (matched by name, in order); a kernel of
    the original missing from the candidate is a signature change."""
    out: list[SpecChange] = []
    by_name = {k.name: k for k in candidate.kernels}
    for k in original.kernels:
        c = by_name.get(k.name)
        if c is None:
            where = candidate.kernels[0].span if candidate.kernels else Span(candidate.path, 1, 1, 1, 2)
            out.append(SpecChange("signature", f"kernel {k.name} of the original is missing", where))
            continue
        out += kernel_changes(k, c)
    extra = [k for k in candidate.kernels if k.name not in {o.name for o in original.kernels}]
    out += [SpecChange("signature", f"kernel {k.name} is not in the original", k.span) for k in extra]
    return out


def frozen_spec_changes(original_text: str, candidate_text: str, original_path: str = "<original>",
                        candidate_path: str = "<candidate>") -> list[SpecChange]:
    """The API of `ave check --frozen-spec`: parse both (a FrontEndError, exit 3, for either that
    does not parse) and compare their specs."""
    from .parser import parse_text

    return spec_changes(parse_text(original_text, original_path), parse_text(candidate_text, candidate_path))
