"""Lowering of a checked AST to relational facts (docs/facts.md): the values names bind to, one
mixin per statement kind, the `KernelFacts` rows and the indexed read-only `KernelView`.

May import: `hw`, `lang`.
"""
