"""Simulate the kernels of a file and compare their outputs with their references."""
from __future__ import annotations

import math

import numpy as np

from ..lang.keywords import check_keywords
from ..lang.resolve import resolve_imports
from ..lang.source import SourceFile
from .interpreter import Simulator
from .reference import compare, evaluate_reference, reference_of
from .state import SimResult


def simulate_source(src: SourceFile, sizes: dict[str, int], kernel: str | None = None, seed: int = 0,
                    blocks: list[tuple[int, ...]] | None = None, shadow: bool = True,
                    probe: dict | None = None, block_prefix: tuple[int, ...] | None = None,
                    async_land: str = "wait",
                    index_entries: dict[str, list[list[int]]] | None = None,
                    max_bytes: int | None = None, compare_reference: bool = True) -> list[tuple[str, SimResult]]:
    """Parse and simulate the kernels of a file (all, or the one named). Every reference is
    parsed and checked before anything runs (a bad one is a FrontEndError, exit 3).
    `compare_reference=False` (counterexample replay: shadow checks only, often of one block)
    leaves `result.reference` None, so a reference of the wrong shape does not stop a replay."""
    from ..lang.parser import parse_source

    module = parse_source(src)
    imports = resolve_imports(module)
    for k in module.kernels:  # a misplaced keyword is refused as `ave check` refuses it (exit 3)
        check_keywords(k)
    references = {k.name: reference_of(k) for k in module.kernels}
    out = []
    for k in module.kernels:
        if kernel is not None and k.name != kernel:
            continue
        if block_prefix is not None:
            blocks = [block_prefix]
        sim = Simulator(k, imports, sizes, blocks=blocks, seed=seed, shadow=shadow, probe=probe, async_land=async_land,
                        index_entries=index_entries, max_bytes=max_bytes)
        result = sim.run()
        ref = references[k.name]
        if ref is not None and compare_reference:
            name = ref.output
            some = len(result.blocks) < math.prod(sim.grid)  # --blocks: not every block ran
            # what the simulated blocks left in it: nothing stored may be right for some blocks (a guard)
            got = result.outputs.get(name, result.inputs.get(name) if some else None)
            if got is None:
                result.reference = {"ok": False, "why": f"the kernel never writes {name}", "output": name}
            else:
                written = _written(result, name, got.shape) if some else None
                r = compare(got, evaluate_reference(ref, result.inputs, result.sizes, got.shape), ref.tolerance,
                            where=written)
                if written is not None:  # some blocks: the elements they wrote, not the untouched rest
                    r["scope"] = "written"
                r["output"] = name
                r["expression"] = ref.text
                result.reference = r
        out.append((k.name, result))
    return out


def _written(result: SimResult, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The elements of output `name` the simulated blocks stored to (a mask of its shape)."""
    counts = result.write_counts.get(name)
    return np.zeros(shape, bool) if counts is None else counts.reshape(shape) > 0
