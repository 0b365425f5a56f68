"""From derived relations to verdicts: the Z3 encoding, div/mod normalisation, provenance
chains, the memory-discipline queries, obligations -> verdicts and counterexamples, violation
sets, and the solver-derived facts the rules need before the fixpoint (`derived_facts`).

May import: `hw`, `lang`, `facts`, `report`.
"""
