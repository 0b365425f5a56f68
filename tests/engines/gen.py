"""Random stratified Datalog programs in the portable profile, for differential testing.

The generator draws every choice through a `Chooser`, so the same code serves Hypothesis
(`HypothesisChooser`: shrinking works) and a seeded `random.Random` (the committed golden corpus).
Stratification holds by construction: relation p<i> may use p<j> positively for j <= i (so
recursion is positive) and negated or inside an aggregate only for j < i.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

EDB = {"e": ("number", "number"), "f": ("number",), "s": ("symbol", "number")}
SYMBOLS = ["a", "b", "c", "d q", 'x"y', "z\\\\w"]


class Chooser:
    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, options: list):
        return options[self.integer(0, len(options) - 1)]

    def boolean(self, p_true: float = 0.5) -> bool:
        return self.integer(0, 99) < int(p_true * 100)


class RandomChooser(Chooser):
    def __init__(self, seed: int):
        self.rnd = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rnd.randint(lo, hi)


class HypothesisChooser(Chooser):
    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


@dataclass
class Case:
    text: str
    facts: dict[str, list[tuple]]
    outputs: list[str]


def _facts(c: Chooser) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for rel, types in EDB.items():
        rows = set()
        for _ in range(c.integer(0, 8)):
            rows.add(tuple(c.integer(-3, 6) if t == "number" else c.choice(SYMBOLS) for t in types))
        out[rel] = sorted(rows)
    return out


def generate(c: Chooser) -> Case:
    n_idb = c.integer(1, 4)
    idb: dict[str, tuple[str, ...]] = {}
    for i in range(n_idb):
        idb[f"p{i}"] = tuple(c.choice(["number", "number", "symbol"]) for _ in range(c.integer(1, 2)))
    lines = [".decl " + r + "(" + ", ".join(f"x{i}:{t}" for i, t in enumerate(ts)) + ")" for r, ts in EDB.items()]
    lines += [".decl " + r + "(" + ", ".join(f"x{i}:{t}" for i, t in enumerate(ts)) + ")" for r, ts in idb.items()]
    lines.append(".input " + ", ".join(EDB))
    for i, (name, types) in enumerate(idb.items()):
        for _ in range(c.integer(1, 3)):
            rule = _rule(c, name, types, i, idb)
            if rule:
                lines.append(rule)
    lines.append(".output " + ", ".join(idb))
    return Case("\n".join(lines) + "\n", _facts(c), list(idb))


def _rule(c: Chooser, head: str, types: tuple[str, ...], level: int, idb) -> str | None:
    """One rule for `head`; body atoms bind typed variables that the head then uses."""
    usable = dict(EDB)
    usable.update({r: t for j, (r, t) in enumerate(idb.items()) if j <= level})
    lower = {r: t for j, (r, t) in enumerate(idb.items()) if j < level}
    lower.update(EDB)
    var_types: dict[str, str] = {}
    body: list[str] = []
    counter = [0]

    def fresh(t: str) -> str:
        counter[0] += 1
        name = f"v{counter[0]}"
        var_types[name] = t
        return name

    def atom(rel: str, ts: tuple[str, ...], bind: bool) -> str:
        args = []
        for t in ts:
            same = [v for v, vt in var_types.items() if vt == t]
            if same and c.boolean(0.5):
                args.append(c.choice(same))
            elif bind:
                args.append(fresh(t) if not c.boolean(0.1) else "_")
            else:
                args.append(c.choice(same) if same else (str(c.integer(0, 3)) if t == "number" else '"a"'))
        return f"{rel}({', '.join(args)})"

    rels = list(usable.items())
    for _ in range(c.integer(1, 2)):
        rel, ts = c.choice(rels)
        body.append(atom(rel, ts, bind=True))
    nums = [v for v, t in var_types.items() if t == "number"]
    if nums and c.boolean(0.4):
        a, b = c.choice(nums), c.choice(nums)
        op = c.choice(["<", "<=", "!=", "=", ">"])
        rhs = c.choice([b, f"{b} + {c.integer(-2, 2)}", f"{b} * 2", f"{b} % 3", f"{b} / 2", f"{b} band 3",
                        f"{b} / -3", f"{b} % -2", f"{b} bshl 2", f"-{b}", f"{b} bshr 1", f"{b} ^ 2"])
        body.append(f"{a} {op} {rhs}")
    if c.boolean(0.3):
        rel, ts = c.choice(list(lower.items()))
        neg = atom(rel, ts, bind=False)
        if all(x in var_types or x[0].isdigit() or x.startswith('"') or x.startswith("-")
               for x in neg[neg.index("(") + 1:-1].split(", ")):
            body.append("!" + neg)
    if c.boolean(0.3) and idb:
        rel, ts = c.choice(list(lower.items()))
        kind = c.choice(["count", "sum", "min", "max"])
        inner_vars = [f"w{i}" for i in range(len(ts))]
        num_pos = [i for i, t in enumerate(ts) if t == "number"]
        if kind != "count" and not num_pos:
            kind = "count"
        target = "" if kind == "count" else inner_vars[c.choice(num_pos)] + " "
        agg_var = fresh("number")
        body.append(f"{agg_var} = {kind} {target}: {{ {rel}({', '.join(inner_vars)}) }}")
    head_args = []
    for t in types:
        same = [v for v, vt in var_types.items() if vt == t]
        if same:
            expr = c.choice(same)
            if t == "number" and c.boolean(0.2):
                expr = f"{expr} + {c.integer(1, 3)}"
            head_args.append(expr)
        else:
            head_args.append(str(c.integer(0, 3)) if t == "number" else f'"{c.choice(SYMBOLS[:3])}"')
    if head in "".join(body) and any(a.endswith(("+ 1", "+ 2", "+ 3")) for a in head_args):
        head_args = [a.split(" + ")[0] for a in head_args]  # keep recursion finite
    return f"{head}({', '.join(head_args)}) :- {', '.join(body)}."
