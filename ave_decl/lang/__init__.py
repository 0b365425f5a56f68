"""The `.ave` language: source files and spans, errors and exit codes, the Lark front end, the
AST and its nesting bound (`depth`), its printer, and name resolution (builtins, instruction imports).

May import: `hw` (instruction names resolve to operand maps). Nothing above it.
"""
