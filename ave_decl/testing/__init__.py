"""Tools for users who test kernel transformations: Hypothesis strategies, text-level mutation
operators, and the `ave fuzz` runner (the transformation catalogue itself is `ave_decl.transform`).

May import: `hw`, `lang`, `report`, `sim`, `transform`, and the public API (`ave_decl.check`).
"""
