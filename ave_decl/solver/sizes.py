"""The smallest sizes a kernel can run at: `ave simulate FILE` without (all of) `--sizes`.

Reads the lowered facts (the assumptions: `assume(...)`, sizes >= 0, tensor dimensions >= 1) and
adds what a run needs: every grid extent >= 1 and every index tensor's value range non-empty.
Z3's Optimize minimises the sum of the missing sizes, then each in parameter order, under a
resource limit (not a wall-clock one), so the answer does not depend on machine load. Lives in
`solver/` because the simulator (`sim/`) may not read facts or call Z3.
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from ..facts.kernel_facts import KernelFacts
from ..facts.lower import lower_module
from ..facts.view import KernelView
from ..lang import ast as A
from ..lang.errors import FrontEndError
from ..lang.parser import parse_source
from ..lang.reference import NUMBER, kernel_names
from ..lang.source import SourceFile
from .smt import Encoder

SEARCH_MAX = 1 << 20  # sizes are searched in [0, SEARCH_MAX]: the point is a small run
RLIMIT = 20_000_000  # Z3 resource units per kernel (deterministic, unlike a timeout)


@dataclass
class ChosenSizes:
    """One kernel's sizes: given on the command line, plus those the search chose."""

    kernel: str
    sizes: dict[str, int]
    chosen: list[str]  # the names the search filled in (empty: all were given)


def size_names(kernel) -> list[str]:
    """The kernel's sizes (int parameters and dimension names), in parameter order."""
    return [n for n, kind in kernel_names(kernel).items() if kind == NUMBER]


def complete_sizes(src: SourceFile, given: dict[str, int], kernel: str | None = None,
                   module: A.Module | None = None, kernels: list[KernelFacts] | None = None) -> list[ChosenSizes]:
    """Per kernel of the file (or the one named): the given sizes, with every missing size set
    to the smallest value the kernel admits. FrontEndError (exit 3) when none exist. A caller
    that has parsed and lowered the file already passes the module and its KernelFacts."""
    module = module if module is not None else parse_source(src)
    wanted = [k for k in module.kernels if kernel is None or k.name == kernel]
    out: list[ChosenSizes] = []
    lowered = {kf.name: kf for kf in kernels} if kernels is not None else None
    for k in wanted:
        missing = [n for n in size_names(k) if n not in given]
        if not missing:
            out.append(ChosenSizes(k.name, dict(given), []))
            continue
        if lowered is None:
            lowered = {kf.name: kf for kf in lower_module(module, src)}
        found = smallest(KernelView.of(lowered[k.name]), size_names(k), given)
        if found == "unknown":
            raise FrontEndError(f"could not find sizes for kernel {k.name} within the search's resource limit; "
                                f"give them with --sizes", k.span)
        if found is None:
            fixed = ", ".join(f"{n}={v}" for n, v in given.items() if n in size_names(k))
            raise FrontEndError(f"no sizes satisfy the assume(...) of kernel {k.name} and a non-empty grid"
                                + (f" with {fixed}" if fixed else "") + f" (searched sizes up to {SEARCH_MAX})",
                                k.span)
        out.append(ChosenSizes(k.name, {**given, **{n: found[n] for n in missing}}, missing))
    return out


def smallest(view: KernelView, names: list[str], given: dict[str, int]) -> dict[str, int] | str | None:
    """The lexicographically smallest (sum first, then each name in order) sizes meeting the
    kernel's assumptions with the given ones fixed; None when there are none, "unknown" when Z3
    gives up (nonlinear assumptions, the resource limit)."""
    enc = Encoder(view)
    opt = z3.Optimize(ctx=enc.ctx)
    opt.set("rlimit", RLIMIT)
    sizes = {n: enc.size(f"size:{n}") for n in names}
    for n, var in sizes.items():
        opt.add(var >= 0, var <= SEARCH_MAX)
        if n in given:
            opt.add(var == given[n])
    for eid in view.assumptions:
        try:
            opt.add(enc.bool_term(eid, {}))
        except KeyError:  # an assumption over thread ids or loop counters: the run checks it
            continue
    for grid, _block in view.launch:
        opt.add(enc.int_term(grid, {}) >= 1)
    for lo, hi, _injective in view.index_values.values():
        opt.add(enc.int_term(hi, {}) > enc.int_term(lo, {}))
    free = [sizes[n] for n in names if n not in given]
    opt.minimize(z3.Sum(free) if len(free) > 1 else free[0])
    for var in free:
        opt.minimize(var)
    result = opt.check()
    if result == z3.unsat:
        return None
    if result != z3.sat:
        return "unknown"
    model = opt.model()
    return {n: model.eval(var, model_completion=True).as_long() for n, var in sizes.items()}
