"""The facts of one or many kernels: relation name -> rows, plus `.facts` file output."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..hw.expr import ExprTable
from ..lang.source import CallSite, SourceFile


@dataclass
class KernelFacts:
    """Everything lowering learned about one kernel, as relations keyed by `kid`."""

    kid: int
    name: str
    source: SourceFile
    table: ExprTable
    rows: dict[str, list[tuple]] = field(default_factory=dict)
    # statement -> the `@device` helper calls it was inlined through (not a relation: rules see
    # the helper's line; reports name the calls too)
    call_sites: dict[int, tuple[CallSite, ...]] = field(default_factory=dict)
    # assert_tag statement -> (its lambda's text, the compared components), for messages
    relation_texts: dict[int, tuple[str, tuple[tuple[str, int, int], ...]]] = field(default_factory=dict)

    def add(self, relation: str, *row) -> None:
        self.rows.setdefault(relation, []).append((self.kid, *row))

    def relation(self, name: str) -> list[tuple]:
        return self.rows.get(name, [])

    def export_expressions(self) -> None:
        """Write the hash-consed expression table as expr/expr_const/expr_sym rows."""
        for rel in ("expr", "expr_const", "expr_sym"):
            self.rows[rel] = []
        for eid, node in enumerate(self.table.nodes):
            if node.op == "const":
                self.add("expr_const", eid, node.value)
            elif node.op == "sym":
                self.add("expr_sym", eid, node.name)
            else:
                args = list(node.args) + [-1] * (2 - len(node.args))
                if len(node.args) > 2:
                    raise ValueError(f"expression {node.op} has more than two operands")
                op = f"uf:{node.name}" if node.op == "uf" else node.op
                self.add("expr", eid, op, args[0], args[1])


def merge(kernels: list[KernelFacts]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for kf in kernels:
        for rel, rows in kf.rows.items():
            out.setdefault(rel, []).extend(rows)
    return out


def write_facts_dir(facts: dict[str, list[tuple]], input_relations: list[str], out_dir: Path) -> list[Path]:
    """Soufflé `.facts` files (tab-separated), one per input relation, empty ones included."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for rel in sorted(input_relations):
        path = out_dir / f"{rel}.facts"
        tmp = path.with_suffix(".facts.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for row in facts.get(rel, []):
                fh.write("\t".join(str(v) for v in row) + "\n")
        tmp.replace(path)
        written.append(path)
    return written
