"""Tools for users who test kernel transformations: Hypothesis strategies, a transformation
catalogue and mutation operators, and the `ave fuzz` runner.

May import: `hw`, `lang`, `report`, `sim`, and the public API (`ave_decl.check`).
"""
