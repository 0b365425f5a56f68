"""From derived relations to verdicts: the Z3 encoding, div/mod normalisation, provenance
chains, the memory-discipline queries, obligations -> verdicts and counterexamples, violation
sets, and the solver-derived facts the rules need before the fixpoint (`derived_facts`).

May import: `hw`, `lang`, `facts`, `report`.
"""

import os as _os
from collections.abc import Iterator as _Iterator
from contextlib import contextmanager as _contextmanager

import z3 as _z3


@_contextmanager
def fast_z3() -> _Iterator[None]:
    """z3's Python API re-validates the arguments of every call (`z3_debug()`, on unless Python
    runs with -O): 5-20% of check time on the examples (docs/performance.md). Ave's terms are
    built by code the test suite covers, and the C API still rejects ill-sorted terms, so the
    checks are off while Ave checks kernels and restored afterwards (a host program's own z3
    use keeps its setting). AVE_Z3_DEBUG=1 keeps them on, e.g. while writing a new encoding."""
    previous = _z3.z3.Z3_DEBUG
    _z3.z3.Z3_DEBUG = previous and _os.environ.get("AVE_Z3_DEBUG", "") == "1"
    try:
        yield
    finally:
        _z3.z3.Z3_DEBUG = previous
