"""Ave's planner: a knowledge base of optimizations with the invariants each must keep, an
analytical performance model, an episode loop whose gates are Ave's verifier and the reference
run, in-context planners, and `ave optimize` (docs/planner.md); repair agents under five kinds
of feedback, the frozen-spec guard in their loop, and the guidance experiment's pieces
(docs/agent-guidance.md). Uses ave_decl's public API only:
`check`, `relations`, `run`, `emit`, `frozen_spec_changes`, the AST and printer, and `ave_decl.transform`."""
from .version import __version__

__all__ = ["__version__"]
