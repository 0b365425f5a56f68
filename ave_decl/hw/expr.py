"""Hash-consed integer/boolean expression DAG shared by the facts, the rules and the Z3 encoding.

Node ids are small integers, unique per kernel; equal sub-expressions share one id.
Leaves: ("const", value) and ("sym", name). Symbol naming conventions:
  size:M        symbolic size M
  tid:0 / bid:1 thread / block index in a dimension
  loop:<stmt>   induction variable of the loop whose statement id is <stmt>
  slot          value index of a whole-register read or write
  arg:<i>       i-th parameter of a tag lambda
  lhs:<i> / rhs:<i>  components of the two tags in a tag relation
"""
from __future__ import annotations

from dataclasses import dataclass, field

BINARY_OPS = {
    "+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod", "^": "xor", "&": "and",
    "|": "or", "<<": "shl", ">>": "shr", "==": "eq", "!=": "ne", "<": "lt", "<=": "le",
    ">": "gt", ">=": "ge", "and": "land", "or": "lor", "min": "min", "max": "max",
}
UNARY_OPS = {"-": "neg", "~": "bnot", "not": "lnot"}
BOOL_OPS = {"eq", "ne", "lt", "le", "gt", "ge", "land", "lor", "lnot", "true"}


@dataclass(frozen=True)
class Node:
    op: str
    args: tuple[int, ...] = ()
    value: int = 0
    name: str = ""


@dataclass
class ExprTable:
    """Per-kernel DAG. `intern` returns the id of an equal node if one exists."""

    nodes: list[Node] = field(default_factory=list)
    _index: dict[Node, int] = field(default_factory=dict)

    def intern(self, node: Node) -> int:
        found = self._index.get(node)
        if found is not None:
            return found
        self.nodes.append(node)
        self._index[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, value: int) -> int:
        return self.intern(Node("const", value=int(value)))

    def sym(self, name: str) -> int:
        return self.intern(Node("sym", name=name))

    def uf(self, name: str, args: tuple[int, ...]) -> int:
        """An uninterpreted function application: the value an index tensor holds at `args`."""
        return self.intern(Node("uf", tuple(args), name=name))

    def op(self, op: str, *args: int) -> int:
        folded = self._fold(op, args)
        if folded is not None:
            return folded
        return self.intern(Node(op, tuple(args)))

    def _const_of(self, eid: int) -> int | None:
        n = self.nodes[eid]
        return n.value if n.op == "const" else None

    def _fold(self, op: str, args: tuple[int, ...]) -> int | None:
        """Constant folding, neutral elements and div/mod identities: keeps Z3 queries small.

        The identities matter for speed: `(x // c) * c + x % c` is `x`, and layouts and lane maps
        produce that shape constantly (measured in bench/check.py: the MFMA pairing proof of
        the LDS GEMM drops from ~0.8 s to ~0.1 s)."""
        vals = [self.nodes[a] for a in args]
        identity = self._identity(op, args)
        if identity is not None:
            return identity
        if all(v.op == "const" for v in vals) and op in _EVAL and not (op in ("floordiv", "mod") and vals[1].value == 0):
            return self.const(_EVAL[op](*[v.value for v in vals]))
        if len(args) == 2:
            a, b = vals
            if op in ("add", "sub", "or", "xor", "shl", "shr") and b.op == "const" and b.value == 0:
                return args[0]
            if op == "add" and a.op == "const" and a.value == 0:
                return args[1]
            if op in ("mul", "floordiv") and b.op == "const" and b.value == 1:
                return args[0]
            if op == "mul" and a.op == "const" and a.value == 1:
                return args[1]
            if op == "mul" and (a.op == "const" and a.value == 0 or b.op == "const" and b.value == 0):
                return self.const(0)
        return None

    def _identity(self, op: str, args: tuple[int, ...]) -> int | None:
        if op == "add":
            for a, b in (args, args[::-1]):
                na, nb = self.nodes[a], self.nodes[b]
                # (x // c) * c + x % c == x
                if na.op == "mul" and nb.op == "mod" and self._const_of(na.args[1]) is not None:
                    c = self._const_of(na.args[1])
                    inner = self.nodes[na.args[0]]
                    if (inner.op == "floordiv" and self._const_of(inner.args[1]) == c and c
                            and self._const_of(nb.args[1]) == c and inner.args[0] == nb.args[0]):
                        return inner.args[0]
            return None
        c = self._const_of(args[1]) if len(args) == 2 else None
        if c is None or c <= 0:
            return None
        x = self.nodes[args[0]]
        if op == "mod":
            # (x % a) % c == x % c when c divides a
            if x.op == "mod" and (self._const_of(x.args[1]) or 0) % c == 0 and self._const_of(x.args[1]):
                return self.op("mod", x.args[0], args[1])
            # (y * a + z) % c == z % c when c divides a (either operand order)
            if x.op == "add":
                for m, z in (x.args, x.args[::-1]):
                    nm = self.nodes[m]
                    if nm.op == "mul" and (self._const_of(nm.args[1]) or 0) % c == 0 and self._const_of(nm.args[1]):
                        return self.op("mod", z, args[1])
            if x.op == "mul" and (self._const_of(x.args[1]) or 0) % c == 0 and self._const_of(x.args[1]):
                return self.const(0)
        if op == "floordiv" and x.op == "floordiv" and (self._const_of(x.args[1]) or 0) > 0:
            # (x // a) // c == x // (a * c) for positive a, c
            return self.op("floordiv", x.args[0], self.const(self._const_of(x.args[1]) * c))
        return None


def substitute(table: ExprTable, eid: int, mapping: dict[str, int]) -> int:
    """The expression with symbols replaced by expressions (rebuilt through the folding `op`)."""
    memo: dict[int, int] = {}

    def go(i: int) -> int:
        if i in memo:
            return memo[i]
        n = table.nodes[i]
        if n.op == "sym":
            r = mapping.get(n.name, i)
        elif n.op == "const":
            r = i
        elif n.op == "uf":
            r = table.uf(n.name, tuple(go(a) for a in n.args))
        else:
            r = table.op(n.op, *[go(a) for a in n.args])
        memo[i] = r
        return r

    return go(eid)


def symbols(table: ExprTable, eid: int) -> set[str]:
    """The symbol names an expression mentions."""
    out: set[str] = set()
    stack, seen = [eid], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        n = table.nodes[i]
        if n.op in ("sym", "uf"):
            out.add(n.name if n.op == "sym" else f"uf:{n.name}")
        stack.extend(n.args)
    return out


def evaluate(table: ExprTable, eid: int, env: dict):
    """Concrete value of a node (booleans as 0/1), Python floor semantics for // and %.

    `env` values may be ints or integer numpy arrays (then the result is an array: every
    point of a finite domain at once)."""
    import numpy as np

    memo: dict[int, object] = {}
    vector = any(isinstance(v, np.ndarray) for v in env.values())

    def go(i: int):
        if i in memo:
            return memo[i]
        n = table.nodes[i]
        if n.op == "const":
            r = n.value
        elif n.op == "sym":
            r = env[n.name]
        elif vector and n.op in _VECTOR:
            r = _VECTOR[n.op](*[go(a) for a in n.args])
        elif n.op == "land":
            r = int(bool(go(n.args[0])) and bool(go(n.args[1])))
        elif n.op == "lor":
            r = int(bool(go(n.args[0])) or bool(go(n.args[1])))
        elif n.op == "lnot":
            r = int(not go(n.args[0]))
        else:
            r = _EVAL[n.op](*[go(a) for a in n.args])
        memo[i] = r
        return r

    return go(eid)


def _vector_ops():
    import numpy as np

    return {
        "eq": lambda a, b: (np.asarray(a) == b).astype(np.int64), "ne": lambda a, b: (np.asarray(a) != b).astype(np.int64),
        "lt": lambda a, b: (np.asarray(a) < b).astype(np.int64), "le": lambda a, b: (np.asarray(a) <= b).astype(np.int64),
        "gt": lambda a, b: (np.asarray(a) > b).astype(np.int64), "ge": lambda a, b: (np.asarray(a) >= b).astype(np.int64),
        "min": np.minimum, "max": np.maximum,
        "land": lambda a, b: np.logical_and(a, b).astype(np.int64),
        "lor": lambda a, b: np.logical_or(a, b).astype(np.int64),
        "lnot": lambda a: np.logical_not(a).astype(np.int64),
    }


class _LazyOps(dict):
    def __missing__(self, key):
        self.update(_vector_ops())
        if key not in self:
            raise KeyError(key)
        return self[key]

    def __contains__(self, key) -> bool:
        if not dict.__len__(self):
            self.update(_vector_ops())
        return dict.__contains__(self, key)


_VECTOR = _LazyOps()


def _floordiv(a: int, b: int) -> int:
    return a // b


_EVAL = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": _floordiv, "mod": lambda a, b: a % b, "xor": lambda a, b: a ^ b,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b, "neg": lambda a: -a, "bnot": lambda a: ~a,
    "eq": lambda a, b: int(a == b), "ne": lambda a, b: int(a != b), "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b), "gt": lambda a, b: int(a > b), "ge": lambda a, b: int(a >= b),
    "min": min, "max": max,
}
