"""The package layout is the pipeline: each stage imports only the stages below it.

Read from the modules' import statements with `ast` (function-level imports included, since a
lazy import is still a dependency); imports under `if TYPE_CHECKING:` are types only and do not
count. The table is docs/architecture.md's, and that page is checked against it too.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ave_decl"

# unit -> the units it may import ("version" may be imported by everyone)
ALLOWED: dict[str, set[str]] = {
    "hw": set(),
    "lang": {"hw"},
    "facts": {"hw", "lang"},
    "datalog": {"lang"},
    "report": {"lang"},
    "codegen": {"hw", "lang"},
    "execute": {"hw", "lang", "codegen", "sim", "solver", "pipeline", "report"},
    "solver": {"hw", "lang", "facts", "report"},
    "sim": {"hw", "lang", "report"},
    "pipeline": {"hw", "lang", "facts", "datalog", "report", "solver", "sim"},
    "api": {"lang", "report", "pipeline", "execute"},
    "audit": {"lang", "datalog", "report", "pipeline"},
    "transform": {"hw", "lang"},
    "testing": {"hw", "lang", "report", "sim", "api", "transform"},
    "draw": {"hw", "lang", "facts", "report", "pipeline"},
    "cli": {"hw", "lang", "facts", "datalog", "report", "solver", "sim", "pipeline", "api", "audit", "testing",
            "transform", "codegen", "execute", "draw"},
    "version": set(),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "api"
    return parts[1]


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported ave_decl module or module-attribute) of every runtime import in the file."""
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    skip = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("ave_decl"):
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    is_module = (PACKAGE.parent / (full.replace(".", "/") + ".py")).exists() or \
                        (PACKAGE.parent / full.replace(".", "/")).is_dir()
                    out.append((node.lineno, full if is_module else target))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("ave_decl")]
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_only_lower_layers(path: Path):
    unit = _unit(_module_name(path))
    assert unit in ALLOWED, f"{path}: unit {unit!r} is not in the layering table (tests/test_layering.py)"
    for line, target in imports_of(path):
        other = _unit(target)
        if other in (unit, "version"):
            continue
        assert other in ALLOWED[unit], f"{path}:{line}: {unit} may not import {target} ({other})"


def test_no_import_cycles_between_modules():
    graph = {_module_name(p): {t for _, t in imports_of(p)} for p in MODULES}
    for node in graph:  # a package import means its __init__ module
        graph[node] = {t for t in graph[node] if t in graph and t != node}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_simulator_does_not_import_the_lowering():
    for path in (PACKAGE / "sim").rglob("*.py"):
        for line, target in imports_of(path):
            assert not target.startswith(("ave_decl.facts", "ave_decl.solver")), f"{path}:{line}: imports {target}"


def _architecture_rows() -> list[list[str]]:
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = text.split("## Packages", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| package") and not line.startswith("| ---")]
    assert rows, "docs/architecture.md has no package table"
    return rows


def test_architecture_table_matches_the_tree():
    """docs/architecture.md lists every module of the tree in its package's row, and nothing else."""
    listed = set()
    for cells in _architecture_rows():
        package = re.fullmatch(r"`([a-z_]+)/`", cells[0])
        prefix = package.group(1) + "/" if package else ""
        listed |= {prefix + m for m in re.findall(r"`([a-z_]+\.py)`", cells[1])}
    actual = {str(p.relative_to(PACKAGE)) for p in MODULES if p.name != "__init__.py" or p.parent == PACKAGE}
    assert sorted(actual - listed) == [], "modules missing from docs/architecture.md's package table"
    assert sorted(listed - actual) == [], "docs/architecture.md lists modules that do not exist"


def test_architecture_table_states_the_enforced_layering():
    for cells in _architecture_rows():
        package = re.fullmatch(r"`([a-z_]+)/`", cells[0])
        if package is None:
            continue
        stated = set(re.findall(r"`([a-z_]+)`", cells[3].split("—")[0]))
        assert stated == ALLOWED[package.group(1)], f"docs/architecture.md: {package.group(1)} may import {stated}"
