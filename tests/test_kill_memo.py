"""Issue 16: a kernel's kills (chains.Expander.not_overwritten) are built once for the same store,
load, instances' terms and first fresh name, and taken again where an obligation asks for them
(the unrolled accumulators' families of speed/gemm_mma_pipelined share their operands). What is
taken again must be what a build would make: the same terms, and the same fresh names consumed,
so that every later term is named as it would be; the report is the one without the memo."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ave_decl import check
from ave_decl.solver import chains

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [ROOT / "examples" / "speed" / "gemm_mma_pipelined.ave",  # families sharing operands
            ROOT / "examples" / "gemm_lds_swizzled.ave",  # kills over a swizzled (bit-decomposed) layout
            ROOT / "examples" / "pipelines" / "gemm_pipelined3_wait2.ave"]  # violations and their kills


def _report(path: Path) -> str:
    return json.dumps(check(str(path), violation_sets=False, confirm=True).to_json(timings=False), sort_keys=True)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_kills_taken_again_are_the_kills_built_each_time(path, monkeypatch):
    """Each kill list asked for, as text (the variables' names included), and the fresh names
    taken after it, are those of a build where it is asked; and so is the report."""
    monkeypatch.setenv("AVE_PROOF_MEMO", "off")  # every query posed, whatever this process proved before
    memoised, build = chains.Expander.not_overwritten, chains.Expander._not_overwritten
    built = [0]

    def counting_build(self, *args):
        built[0] += 1
        return build(self, *args)

    def recording(kills_of, seen: list):
        def ask(self, *args):
            kills = kills_of(self, *args)
            seen.append(([k.sexpr() for k in kills], self.enc.names_used()))
            return kills
        return ask

    with_memo: list = []
    monkeypatch.setattr(chains.Expander, "_not_overwritten", counting_build)
    monkeypatch.setattr(chains.Expander, "not_overwritten", recording(memoised, with_memo))
    report = _report(path)
    if path.stem == "gemm_mma_pipelined":
        assert built[0] < len(with_memo), "the families' shared operands took their kills again"
    each_time: list = []
    monkeypatch.setattr(chains.Expander, "not_overwritten", recording(build, each_time))
    assert _report(path) == report
    assert each_time == with_memo
