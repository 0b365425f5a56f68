"""The concrete simulator (ground truth), its race detector, and counterexample replay.

It interprets the AST, never the facts, so a lowering bug is not replicated in the ground
truth. May import: `hw`, `lang`, `report` (replay reads counterexamples). Never `facts` or
`solver`.
"""
