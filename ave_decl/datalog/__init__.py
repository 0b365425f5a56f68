"""The Soufflé-profile rule language: parser, linter, the embedded (clingo) and Soufflé
engines, and the rule set shipped in rules/.

May import: `lang` (spans, errors, data files). It knows nothing of kernels: facts are rows.
"""
