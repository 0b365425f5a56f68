"""Every `--json` report validates against the published schema (docs/report.schema.json)."""
from __future__ import annotations

import json

import jsonschema
from conftest import DATA, EXAMPLES, ROOT

SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())


def test_schema_is_valid():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_reports_validate(tmp_path, ave):
    bad = tmp_path / "bad.ave"
    bad.write_text("@kernel(grid=(1,), block=64)\ndef k(X: Tensor[f32, (N,)]):\n    v = X[0, 1]\n")
    cases = [sorted(EXAMPLES.glob("*.ave")), [bad], [DATA / "hard_nonlinear.ave", "--timeout", "0.2"],
             # helpers (called_from), wave specialization (branch/barrier chain points, path sides)
             ["--confirm", *sorted(EXAMPLES.glob("helpers/*.ave")), *sorted(EXAMPLES.glob("specialized/*.ave")),
              *sorted(EXAMPLES.glob("buffers/*.ave")), *sorted(EXAMPLES.glob("subviews/*.ave")),
              DATA / "specialized" / "one_arm_barrier.ave"]]
    for args in cases:
        data = ave("check", "--json", *args).json()
        jsonschema.validate(data, SCHEMA)
