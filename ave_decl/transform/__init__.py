"""AST -> AST kernel rewrites: the catalogue of semantics-preserving transformations, the mutation
operators that should be caught, and the GEMM / attention templates. Public API for the fuzzer
(`ave_decl.testing`) and for plug-ins such as the planner (`ave_planner`): a rewrite takes and
returns an `ast.Module` and returns it unchanged where its pattern does not apply.

May import: `hw`, `lang`.
"""
from .catalogue import CATALOGUE, MUTATIONS

__all__ = ["CATALOGUE", "MUTATIONS"]
