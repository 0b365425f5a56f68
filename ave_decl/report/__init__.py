"""The report model (verdicts, findings, counterexamples) and its renderings: rustc-style text,
SARIF, suppressions and baselines.

May import: `lang`.
"""
