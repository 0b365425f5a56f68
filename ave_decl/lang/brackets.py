"""The bracket a syntax error really comes from: one opened and never closed.

Why: inside brackets line ends do not end a statement, so a missing `)` surfaces as an
unexpected token on some later line ("unexpected 'A'" at the next statement). CPython names the
bracket instead ("'(' was never closed"); so does the front end, from Python's own tokenizer (the
language is Python's syntax), when a bracket is still open at the end of the file.
"""
from __future__ import annotations

import io
import tokenize

_PAIRS = {")": "(", "]": "[", "}": "{"}


def unclosed_bracket(text: str) -> tuple[int, int, str] | None:
    """(line, 1-based column, bracket) of the outermost bracket still open at the end of `text`;
    None when every bracket closes, a closer does not match its opener (another error), or the
    text cannot be tokenized for another reason (a string left open)."""
    stack: list[tuple[int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.OP:
                continue
            if tok.string in "([{":
                stack.append((tok.start[0], tok.start[1] + 1, tok.string))
            elif tok.string in _PAIRS:
                if not stack or stack[-1][2] != _PAIRS[tok.string]:
                    return None
                stack.pop()
    except tokenize.TokenError as exc:
        if "statement" not in str(exc.args[0]):  # "EOF in multi-line string": a string left open
            return None
        # "EOF in multi-line statement": the brackets on the stack were never closed
    except (SyntaxError, ValueError):  # an indentation the tokenizer refuses, a NUL byte
        return None
    return stack[0] if stack else None
