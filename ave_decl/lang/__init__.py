"""The `.ave` language: source files and spans, errors and exit codes, the Lark front end, the
AST and its nesting bound (`depth`), its printer, and name resolution (builtins, instruction imports);
and what keeps a child process from outliving its parent (`lifetime`).

May import: `hw` (instruction names resolve to operand maps). Nothing above it.
"""
