"""Where a fact's ids point in the source: statement, access and value ids -> spans; expression
ids -> their text. Used by `ave check --print-relation` so a rule author reads `a=3` as
`gemm.ave:14:9` instead of looking the id up in five other relations."""
from __future__ import annotations

from ..hw.expr import ExprTable
from ..lang.source import Span
from .kernel_facts import KernelFacts

# the schema's id types (rules/schema.dl) whose columns can be located
LOCATED_TYPES = ("Stmt", "Access", "Value", "ExprId")
EXPR_TEXT_LIMIT = 120  # characters of an expression's text before it is cut with "..."

_INFIX = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "xor": "^", "and": "&", "or": "|",
          "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "land": "and", "lor": "or"}
_PREFIX = {"neg": "-", "bnot": "~", "lnot": "not "}


class Locator:
    """Indexes one kernel's facts once; each lookup is a dictionary read."""

    def __init__(self, kf: KernelFacts):
        self.kf = kf
        path = kf.source.path
        self.stmts = {s: Span(path, line, col, el, ec, kf.call_sites.get(s, ()))
                      for _, s, _kind, line, col, el, ec in kf.relation("stmt")}
        self.access_stmt = {a: s for _, a, s, _b, _kind in kf.relation("access")}
        self.value_stmt = {v: s for _, v, _kind, s in kf.relation("value")}

    def span(self, kind: str, ident: object) -> Span | None:
        """The span of a Stmt / Access / Value id (an access or value: its statement's)."""
        if not isinstance(ident, int):
            return None
        if kind == "Access":
            ident = self.access_stmt.get(ident, -1)
        elif kind == "Value":
            ident = self.value_stmt.get(ident, -1)
        elif kind != "Stmt":
            return None
        span = self.stmts.get(ident)
        return span if span is not None and span.line > 0 else None

    def expr(self, ident: object) -> str | None:
        """The text of an ExprId (`size:M`, `tid:0`, `loop:4` are the schema's symbol names)."""
        if not isinstance(ident, int) or not 0 <= ident < len(self.kf.table.nodes):
            return None
        return expr_text(self.kf.table, ident, EXPR_TEXT_LIMIT)


def expr_text(table: ExprTable, eid: int, limit: int) -> str:
    """Fully parenthesised infix text of a node, cut at `limit` characters (an iterative walk:
    deep expressions do not recurse)."""
    out: list[str] = []
    stack: list[int | str] = [eid]  # node ids still to print, and literal text, last first
    size = 0
    while stack and size <= limit:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            size += len(item)
            continue
        node = table.nodes[item]
        if node.op == "const":
            stack.append(str(node.value))
        elif node.op == "sym":
            stack.append(node.name)
        elif node.op in _PREFIX and len(node.args) == 1:
            stack += [")", node.args[0], f"({_PREFIX[node.op]}"]
        elif node.op in _INFIX and len(node.args) == 2:
            stack += [")", node.args[1], f" {_INFIX[node.op]} ", node.args[0], "("]
        else:  # min/max, an index-tensor read (uf), anything else: call syntax
            name, close = (f"{node.name}[", "]") if node.op == "uf" else (f"{node.op}(", ")")
            stack.append(close)
            for i, arg in reversed(list(enumerate(node.args))):
                stack.append(arg)
                if i:
                    stack.append(", ")
            stack.append(name)
    text = "".join(out)
    return text if not stack and size <= limit else text[:limit] + "..."
