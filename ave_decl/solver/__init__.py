"""From derived relations to verdicts: the Z3 encoding, div/mod normalisation, provenance
chains, the memory-discipline queries, obligations -> verdicts and counterexamples, violation
sets, and the solver-derived facts the rules need before the fixpoint (`derived_facts`).

May import: `hw`, `lang`, `facts`, `report`.
"""

import os as _os

import z3 as _z3

# z3's Python API re-validates the arguments of every call (`z3_debug()`, on unless Python runs
# with -O): about a quarter of check time on the GEMM examples (docs/performance.md). The C API
# still rejects ill-sorted terms with an exception, so only the Python-side duplicate checks go.
# AVE_Z3_DEBUG=1 turns them back on when a new encoding is being written.
_z3.z3.Z3_DEBUG = _os.environ.get("AVE_Z3_DEBUG", "") == "1"
