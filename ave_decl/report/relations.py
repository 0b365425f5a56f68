"""The tuples of one relation for one kernel (`ave check --print-relation REL`), as text and JSON.

A rule author debugging an invariant needs to see what the facts and the core rules derived;
ids of statements, accesses and values are shown with their source location, expression ids
with their text (docs/writing-invariants.md, "Debugging your rule")."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .model import Location


@dataclass
class RelationTuple:
    values: list[int | str]
    locations: list[Location | None]  # per column: where a Stmt / Access / Value id points
    expressions: list[str | None]  # per column: the text of an ExprId


@dataclass
class RelationDump:
    relation: str
    kernel: str | None  # None: the relation has no kernel column (printed once per run)
    file: str | None
    columns: list[str]
    types: list[str]
    tuples: list[RelationTuple] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"relation": self.relation, "kernel": self.kernel, "file": self.file,
                "columns": [{"name": n, "type": t} for n, t in zip(self.columns, self.types)],
                "tuples": [{"values": t.values,
                            "locations": [None if loc is None else vars(loc).copy() for loc in t.locations],
                            "expressions": t.expressions} for t in self.tuples]}


def render_relations(dumps: list[RelationDump]) -> str:
    """One header per (relation, kernel), one line per tuple, notes after the tuple."""
    lines: list[str] = []
    for d in dumps:
        where = f" in {d.kernel} ({d.file})" if d.kernel is not None else ""
        cols = ", ".join(f"{n}:{t}" for n, t in zip(d.columns, d.types))
        lines.append(f"relation {d.relation}({cols}){where}: {len(d.tuples)} tuple{'' if len(d.tuples) == 1 else 's'}")
        for t in d.tuples:
            cells = ", ".join(json.dumps(v) if isinstance(v, str) else str(v) for v in t.values)
            notes = []
            for name, value, loc, text in zip(d.columns, t.values, t.locations, t.expressions):
                if loc is not None:
                    notes.append(f"{name}={value} at {loc}")
                elif text is not None:
                    notes.append(f"{name}={value} is {text}")
            lines.append(f"  ({cells})" + (f"  {'; '.join(notes)}" if notes else ""))
        lines.append("")
    return "\n".join(lines)
