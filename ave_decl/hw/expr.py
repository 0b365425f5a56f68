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

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

BINARY_OPS = {
    "+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod", "^": "xor", "&": "and",
    "|": "or", "<<": "shl", ">>": "shr", "==": "eq", "!=": "ne", "<": "lt", "<=": "le",
    ">": "gt", ">=": "ge", "and": "land", "or": "lor", "min": "min", "max": "max",
}
UNARY_OPS = {"-": "neg", "~": "bnot", "not": "lnot"}
BOOL_OPS = {"eq", "ne", "lt", "le", "gt", "ge", "land", "lor", "lnot", "true"}

# The bounds a kernel's table keeps (docs/language.md, "Limits"). Constants are 32-bit like the
# facts both Datalog engines carry and the bit-vector encoding of `^ & | ~`; the depth bound keeps
# every recursive walk of the DAG (Z3 encoding, substitution, evaluation) far from Python's
# recursion limit (legitimate kernels reach depth 11).
CONST_BOUND = 2 ** 31
MAX_EXPR_DEPTH = 100
MAX_SHIFT = 63  # a constant shift count outside [0, 63] is refused: 2 ** count must stay small


class ExprLimitError(ValueError):
    """A bound of a bounded table was exceeded (the lowering reports it at the expression)."""


class ConstantError(ExprLimitError):
    """An integer constant (written or folded) outside [-CONST_BOUND, CONST_BOUND), or an
    operation on constants that has no value (a negative or huge shift count)."""


class ExprTooDeep(ExprLimitError):
    """An expression deeper than the table's `max_depth` (after inlining index names)."""


@dataclass(frozen=True)
class Node:
    op: str
    args: tuple[int, ...] = ()
    value: int = 0
    name: str = ""


@dataclass
class ExprTable:
    """Per-kernel DAG. `intern` returns the id of an equal node if one exists.

    A kernel's table is bounded (`bounded()`): constants must lie in [-const_bound, const_bound)
    and no node may be deeper than `max_depth`; violations raise ExprLimitError. An unbounded
    table (the default, for algebra and tests) still never folds a shift whose result would be
    huge, so folding itself cannot take unbounded time or memory."""

    nodes: list[Node] = field(default_factory=list)
    _index: dict[Node, int] = field(default_factory=dict)
    const_bound: int | None = None
    max_depth: int | None = None
    depth: list[int] = field(default_factory=list)

    @staticmethod
    def bounded() -> "ExprTable":
        return ExprTable(const_bound=CONST_BOUND, max_depth=MAX_EXPR_DEPTH)

    def intern(self, node: Node) -> int:
        found = self._index.get(node)
        if found is not None:
            return found
        d = 1 + max((self.depth[a] for a in node.args), default=0)
        if self.max_depth is not None and d > self.max_depth:
            raise ExprTooDeep(f"index expression is nested too deeply: more than {self.max_depth} operations "
                              f"deep once index names are inlined")
        self.nodes.append(node)
        self.depth.append(d)
        self._index[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, value: int) -> int:
        value = int(value)
        if self.const_bound is not None and not -self.const_bound <= value < self.const_bound:
            raise ConstantError(f"integer constant {_digits(value)} is out of range: constants must lie in "
                                f"[-2**31, 2**31)" if self.const_bound == CONST_BOUND else
                                f"integer constant {_digits(value)} is out of range (bound {self.const_bound})")
        return self.intern(Node("const", value=value))

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
        if op in ("shl", "shr") and vals[1].op == "const" and not 0 <= vals[1].value <= MAX_SHIFT:
            if self.const_bound is not None and vals[0].op == "const" and vals[0].value and op == "shl" \
                    and vals[1].value > 0:
                raise ConstantError(f"integer constant {_digits(vals[0].value)} << {_digits(vals[1].value)} is out of "
                                    f"range: constants must lie in [-2**31, 2**31)")
            if self.const_bound is not None:
                raise ConstantError(f"shift count {_digits(vals[1].value)} is out of range: a constant shift "
                                    f"count must lie in [0, {MAX_SHIFT}]")
            return None  # unbounded table: kept as a node, never computed (1 << 10**10 is 1.25 GB)
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
            # (x // a) // c == x // (a * c) for positive a, c (when a * c is itself a constant)
            ac = self._const_of(x.args[1]) * c
            if self.const_bound is None or ac < self.const_bound:
                return self.op("floordiv", x.args[0], self.const(ac))
        return None


def _digits(value: int) -> str:
    """A short rendering of a possibly huge integer (str() of a 10**5-digit int is refused)."""
    if abs(value) < 10 ** 30:
        return str(value)
    return f"{'-' if value < 0 else ''}2**{abs(value).bit_length() - 1}+"


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

    try:
        return go(eid)
    finally:
        del go  # empties the closure's cell: no function <-> cell cycle left for the collector


def _nodes(table: ExprTable, eid: int, prune: Callable[[Node], bool] = lambda n: False) -> Iterator[tuple[int, Node]]:
    """Each node under `eid` once, depth first; the arguments of a node `prune` holds for are not walked."""
    stack, seen = [eid], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        n = table.nodes[i]
        yield i, n
        if not prune(n):
            stack.extend(n.args)


def symbols(table: ExprTable, eid: int) -> set[str]:
    """The symbol names an expression mentions."""
    return {n.name if n.op == "sym" else f"uf:{n.name}" for _i, n in _nodes(table, eid) if n.op in ("sym", "uf")}


def residues(table: ExprTable, eid: int, known: Callable[[str], bool],
             varying: Callable[[str], bool]) -> tuple[dict[int, int], set[str]] | None:
    """The remainders `E % m` (m a positive constant) of an expression whose E mentions a name
    `known` rejects and none that is `varying`, as node id -> m, and the names the expression
    mentions outside them, when all of those are known; else None.
    Why: such a remainder lies in [0, m) whatever E is (floor semantics, here and in the Z3
    encoding), so evaluating the expression at every value of [0, m) in its place covers every
    value the expression can take, e.g. a pipeline's stage `(kt // 32) % 2` of a loop whose
    bound is a size (a superset: the remainders are taken independently). `varying` names
    (thread ids) differ between the points an enumeration compares (two lanes of one phase),
    where one remainder value for both would not cover `(t + kt // 32) % 2`; a remainder over
    them is not taken, so its unknown names make the answer None."""

    def modulus(n: Node) -> int | None:
        if n.op != "mod":
            return None
        m = table.nodes[n.args[1]]
        names = symbols(table, n.args[0])
        if m.op == "const" and m.value > 0 and not all(map(known, names)) and not any(map(varying, names)):
            return m.value
        return None

    out: dict[int, int] = {}
    names: set[str] = set()
    for i, n in _nodes(table, eid, lambda n: modulus(n) is not None):
        m = modulus(n)
        if m is not None:
            out[i] = m
        elif n.op == "uf" or (n.op == "sym" and not known(n.name)):
            return None
        elif n.op == "sym":
            names.add(n.name)
    return out, names


def evaluate(table: ExprTable, eid: int, env: dict, given: dict[int, object] | None = None):
    """Concrete value of a node (booleans as 0/1), Python floor semantics for // and %.
    `given`: values of subterms by node id, used in place of evaluating them (residues()).

    `env` values may be ints or integer numpy arrays (then the result is an array: every
    point of a finite domain at once). Division and remainder by zero give 0 in both modes
    (numpy's integer convention; the Z3 encoding leaves them unspecified and a GPU's result is
    undefined), without a RuntimeWarning on stderr; on Python ints a shift by a count outside
    [0, 63] (`<<`) or a negative count (`>>`) gives 0 instead of raising or allocating 2**count."""
    import numpy as np

    memo: dict[int, object] = dict(given or {})
    vector = any(isinstance(v, np.ndarray) for v in [*env.values(), *memo.values()])
    with np.errstate(all="ignore"):
        return _evaluate(table, eid, env, memo, vector)


def _evaluate(table: ExprTable, eid: int, env: dict, memo: dict, vector: bool):

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

    try:
        return go(eid)
    finally:
        del go  # empties the closure's cell: no function <-> cell cycle left for the collector


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


def _floordiv(a, b):
    try:
        return a // b
    except ZeroDivisionError:  # Python ints; numpy gives 0 (warnings silenced by `evaluate`)
        return 0


def _mod(a, b):
    try:
        return a % b
    except ZeroDivisionError:
        return 0


def _shl(a, b):
    if isinstance(b, int) and not 0 <= b <= MAX_SHIFT:
        return 0
    return a << b


def _shr(a, b):
    if isinstance(b, int) and b < 0:
        return 0
    return a >> b


_EVAL = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": _floordiv, "mod": _mod, "xor": lambda a, b: a ^ b,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "shl": _shl,
    "shr": _shr, "neg": lambda a: -a, "bnot": lambda a: ~a,
    "eq": lambda a, b: int(a == b), "ne": lambda a, b: int(a != b), "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b), "gt": lambda a, b: int(a > b), "ge": lambda a, b: int(a >= b),
    "min": min, "max": max,
}
