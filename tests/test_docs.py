"""Docs stay true to the code: every schema relation and rule id is documented."""
from __future__ import annotations

import re

from conftest import ROOT

from ave_decl.datalog.ruleset import load_rules


def test_every_input_relation_is_in_facts_md():
    doc = (ROOT / "docs" / "facts.md").read_text()
    prog = load_rules()
    missing = [r for r in sorted(prog.inputs) if f"`{r}(" not in doc]
    assert not missing, f"docs/facts.md lacks {missing}"


def test_every_invariant_has_a_header():
    prog = load_rules()
    for meta in prog.files:
        if "/invariants/" in meta.path:
            for key in ("id", "title", "severity", "description", "help"):
                assert meta.fields.get(key), f"{meta.path} lacks @{key}"
        else:
            assert meta.fields.get("id") and meta.fields.get("title"), meta.path


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    assert "make demo" in first_block and "make test" in first_block


def test_every_rule_file_is_installed():
    """setup.cfg lists the data files a non-editable install ships: every grammar and rule file."""
    cfg = (ROOT / "setup.cfg").read_text()
    files = sorted(ROOT.glob("rules/*.dl")) + sorted(ROOT.glob("rules/invariants/*.dl")) + sorted(ROOT.glob("grammar/*"))
    missing = [str(f.relative_to(ROOT)) for f in files if str(f.relative_to(ROOT)) not in cfg]
    assert not missing, f"setup.cfg [options.data_files] lacks {missing}"


def test_debugging_example_in_writing_invariants_runs(tmp_path, ave):
    """docs/writing-invariants.md §8: the rule file, the command and the output it shows."""
    text = (ROOT / "docs" / "writing-invariants.md").read_text()
    section = text[text.index("## 8. Debugging your rule"):]
    rule, command, shown = re.findall(r"```\n(.*?)```", section, re.S)[:3]
    rules = tmp_path / "myrules"
    rules.mkdir()
    (rules / "column_reads.dl").write_text(rule)
    args = command.split()
    assert args[:2] == ["ave", "check"]
    args = [str(rules) if a == "myrules" else str(ROOT / a) if a.startswith("examples/") else a for a in args[1:]]
    r = ave(*args)
    assert r.code == 0, r.out + r.err
    out = r.out.replace(str(ROOT) + "/", "")
    for line in shown.strip().splitlines():
        assert line in out.splitlines(), line


def _console_outputs(text: str) -> dict[str, list[str]]:
    """The README's console blocks: each `$ .venv/bin/ave ...` command (an `# (excerpt)` comment
    dropped) -> the lines shown after it, up to the next command or the block's end."""
    out: dict[str, list[str]] = {}
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        command = None
        for line in block.splitlines():
            if line.startswith("$ "):
                command = line[2:].split("#")[0].strip()
                out[command] = []
            elif command is not None:
                out[command].append(line)
    return out


def _shown(line: str) -> re.Pattern:
    """A shown line as a pattern: `…` stands for text the README leaves out."""
    return re.compile(".*".join(re.escape(part) for part in line.split("…")) + r"\Z")


def test_readme_tour_shows_what_ave_prints(ave, monkeypatch):
    """The tour's console output is what `ave` prints today (a newcomer checks every number):
    the counterexample of step 3 in full, the excerpt of step 2 line by line, step 4 with `…`
    for what it leaves out."""
    monkeypatch.chdir(ROOT)
    blocks = _console_outputs((ROOT / "README.md").read_text())

    def printed(command: str) -> list[str]:
        args = command.split()
        assert args[0] == ".venv/bin/ave", command
        return ave(*args[1:]).out.rstrip("\n").splitlines()

    full = ".venv/bin/ave check --confirm examples/gemm_lds_mfma_transposed.ave"
    assert printed(full) == blocks[full]
    excerpt = ".venv/bin/ave check examples/gemm_lds_mfma.ave -v --no-timings"
    lines = printed(excerpt)
    for line in blocks[excerpt]:
        assert line.strip() == "..." or line in lines, line
    simulated = ".venv/bin/ave simulate examples/gemm_lds_mfma_transposed.ave --sizes M=64,N=64,K=64"
    lines = printed(simulated)
    assert len(lines) == len(blocks[simulated])
    for shown, line in zip(blocks[simulated], lines):
        assert _shown(shown).match(line), (shown, line)
