"""Regenerate the golden outputs from a live Soufflé (32-bit build on PATH or AVE_SOUFFLE).

    python -m tests.engines.regen          # from the repository root, after `make install`

Runs every corpus program, the seeded random programs and the core rules on every example with
Soufflé at -j1 and -j2, requires the two to agree, and writes tests/engines/golden/*.json. Run it
whenever the rules, the corpus or the generator change; commit the JSON (data only).
"""
from __future__ import annotations

import json
import sys

from ave_decl.datalog.ruleset import load_rules
from ave_decl.datalog.souffle_engine import SouffleEngine, _version, find_souffle
from ave_decl.facts.kernel_facts import merge
from ave_decl.pipeline import front_end, read_sources

from .gen import RandomChooser, generate
from .oracle import CORPUS, GOLDEN, _norm, case_facts, souffle_outcome, to_json_outcome

RANDOM_SEEDS = range(200)
ROOT = GOLDEN.parent.parent.parent


def both(text, facts):
    one, two = souffle_outcome(text, facts, 1), souffle_outcome(text, facts, 2)
    if one != two:
        raise SystemExit(f"souffle -j1 and -j2 disagree on:\n{text}")
    return one


def main() -> None:
    binary = find_souffle()
    if not binary:
        raise SystemExit("souffle not found: put a 32-bit build on PATH or set AVE_SOUFFLE")
    GOLDEN.mkdir(exist_ok=True)
    version = "; ".join(ln.strip() for ln in _version(binary).splitlines() if ln.startswith(("Version", "Word size")))
    version = "Soufflé 2.5 (" + version + ")"
    corpus = {}
    for dl in sorted(CORPUS.glob("*.dl")):
        corpus[dl.stem] = to_json_outcome(both(dl.read_text(), case_facts(dl)))
    _write("corpus.json", {"souffle": version, "cases": corpus})
    cases = []
    for seed in RANDOM_SEEDS:
        case = generate(RandomChooser(seed))
        cases.append({"seed": seed, "program": case.text, "facts": case.facts,
                      **to_json_outcome(both(case.text, case.facts))})
    _write("random.json", {"souffle": version, "cases": cases})
    sources, _ = read_sources([str(p) for p in sorted((ROOT / "examples").glob("*.ave"))])
    fe = front_end(sources)
    prog = load_rules()
    facts = merge(fe.kernels)
    one = SouffleEngine(prog, binary, jobs=1).run(facts)
    two = SouffleEngine(prog, binary, jobs=2).run(facts)
    if _norm(one) != _norm(two):
        raise SystemExit("souffle -j1 and -j2 disagree on the core rules")
    kernels = {kf.kid: f"{kf.source.path.split('/')[-1]}::{kf.name}" for kf in fe.kernels}
    _write("examples.json", {"souffle": version, "kernels": kernels, "derived": _norm(one)})
    print(f"golden outputs written to {GOLDEN} ({len(corpus)} corpus cases, {len(cases)} random programs)")


def _dump(obj, depth: int = 0) -> str:
    """JSON with one line per row: lists of scalars stay on one line (readable diffs)."""
    pad = " " * (depth + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {_dump(v, depth + 1)}"
                 for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    if isinstance(obj, list) and obj and any(isinstance(x, (list, dict)) for x in obj):
        return "[\n" + ",\n".join(pad + _dump(x, depth + 1) for x in obj) + "\n" + " " * depth + "]"
    return json.dumps(obj, ensure_ascii=False)


def _write(name: str, data) -> None:
    (GOLDEN / name).write_text(_dump(data) + "\n")


if __name__ == "__main__":
    sys.exit(main())
