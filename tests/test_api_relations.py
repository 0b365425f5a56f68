"""`ave_decl.relations` and `ave_decl.invariants`: the fixpoint without the solver, for plug-ins
that ask Datalog questions of a kernel (the planner's preconditions)."""
from __future__ import annotations

from conftest import EXAMPLES

import ave_decl


def test_relations_give_facts_and_derived_tuples_without_solving(tmp_path):
    rules = tmp_path / "q.dl"
    rules.write_text(".decl global_load_in_loop(k:Kernel, b:Buffer)\n"
                     "global_load_in_loop(k, b) :- parent_loop(k, s, _), access(k, _, s, b, \"load\"),"
                     " buffer(k, b, \"global\", _).\n")
    dumps, errors = ave_decl.relations(EXAMPLES / "gemm_naive.ave", ["loop", "global_load_in_loop"],
                                       rules=[str(rules)])
    assert errors == []
    by = {d.relation: d for d in dumps}
    assert [t.values[3] for t in by["loop"].tuples] == ["k"]
    assert sorted(t.values[1] for t in by["global_load_in_loop"].tuples) == ["A", "B"]
    assert by["loop"].kernel == "gemm_naive"


def test_an_unknown_relation_or_a_bad_rule_is_an_error_report_not_an_exception(tmp_path):
    dumps, errors = ave_decl.relations(EXAMPLES / "gemm_naive.ave", ["lopo"])
    assert dumps == [] and "did you mean loop" in errors[0].message
    bad = tmp_path / "bad.dl"
    bad.write_text(".decl q(k:Kernel)\nq(k) :- kernel(k, _, _) kernel.\n")
    dumps, errors = ave_decl.relations(EXAMPLES / "gemm_naive.ave", ["q"], rules=[str(bad)])
    assert dumps == [] and errors[0].location.file == str(bad) and errors[0].location.line == 2


def test_invariants_lists_the_library_with_titles():
    found = ave_decl.invariants()
    assert "ave/mma-k-pairing" in found and found["ave/mma-k-pairing"]["title"]
