"""The Soufflé engine: the same linted `.dl` files, run by a `souffle` binary as a subprocess.

Operational rules from ../shared/reference/datalog-engines.md §2: no shell; a 32-bit build is
required (checked from `--version`); every input relation is written as a `.facts` file, empty
ones too; the output directory exists before the run; `--wno=all` (not `-w`, which also hides
missing fact files); Soufflé's errors (`Error: … in file F at line N`, exit 1; 134 on
preprocessor failures) are mapped back to the user's `.dl` file and line.

A broken install is survived, never an internal error: its bytes are decoded with replacement,
an output row that a 32-bit Soufflé cannot have written is EngineUnavailable (exit code 2, like
a missing or 64-bit binary), and a run without `--engine-timeout` is bounded by
DEFAULT_TIMEOUT_S. The process runs in its own process group, killed whole, and the temporary
directory is removed on every path: normal, error, timeout, KeyboardInterrupt and SIGTERM
(children.py).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from ..lang.errors import EngineTimeout, EngineUnavailable, RuleError
from ..lang.source import Span
from .children import Expired, run_group, sigterm_unwinds
from .program import Program

DEFAULT_TIMEOUT_S = 600.0  # a run without --engine-timeout: far above any real fixpoint, never unbounded
VERSION_TIMEOUT_S = 30.0
MESSAGE_CHARS = 300  # an error line quoted from Soufflé's output is cut to this
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

_ERROR = re.compile(r"^(Error|Warning): (?P<msg>.*?) in file (?P<file>.+?) at line (?P<line>\d+)\s*$")
_RUNTIME = re.compile(r"in file (?P<file>.+?) \[(?P<line>\d+):(?P<col>\d+)-\d+:\d+\]")
_INCLUDE_ERR = re.compile(r"^(?P<file>.+?):(?P<line>\d+): error: (?P<msg>.*)$")


def find_souffle() -> str | None:
    """`AVE_SOUFFLE` if set, else `souffle` on PATH."""
    explicit = os.environ.get("AVE_SOUFFLE")
    if explicit:
        return explicit if Path(explicit).is_file() and os.access(explicit, os.X_OK) else None
    return shutil.which("souffle")


@lru_cache(maxsize=4)
def _version(binary: str) -> str:
    try:
        with sigterm_unwinds():
            proc = run_group([binary, "--version"], VERSION_TIMEOUT_S)
    except OSError as exc:
        raise EngineUnavailable(f"cannot run {binary} --version: {_cut(str(exc))}") from None
    except Expired:
        raise EngineUnavailable(f"{binary} --version did not answer within {VERSION_TIMEOUT_S:g} s") from None
    return proc.stdout + proc.stderr


def check_binary(binary: str) -> None:
    text = _version(binary)
    m = re.search(r"Word size:\s*(\d+)", text)
    if not m:
        raise EngineUnavailable(f"{binary} does not look like Soufflé (no 'Word size' in --version)")
    if m.group(1) != "32":
        raise EngineUnavailable(f"{binary} is a {m.group(1)}-bit Soufflé build; the portable profile needs 32-bit "
                                f"numbers (the default build, SOUFFLE_DOMAIN_64BIT=OFF)")


def _write_facts(path: Path, rows: list[tuple]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            cells = []
            for v in row:
                text = str(int(v)) if isinstance(v, (bool, int)) else str(v)
                if "\t" in text or "\n" in text:
                    raise RuleError(f"a symbol with a tab or newline cannot be passed to Soufflé: {text!r}", None)
                cells.append(text)
            fh.write("\t".join(cells) + "\n")


class SouffleEngine:
    """Runs a linted Program with `souffle` (interpreter); returns every output relation as sorted rows."""

    name = "souffle"

    def __init__(self, prog: Program, binary: str | None = None, jobs: int = 1):
        found = binary or find_souffle()
        if not found:
            raise EngineUnavailable("souffle was not found (install it on PATH or set AVE_SOUFFLE); "
                                    "use --engine embedded")
        check_binary(found)
        self.binary = found
        self.prog = prog
        self.jobs = jobs

    def run(self, facts: dict[str, list[tuple]], timeout: float | None = None) -> dict[str, list[tuple]]:
        """Every output relation's sorted rows; `timeout` None means DEFAULT_TIMEOUT_S."""
        limit = DEFAULT_TIMEOUT_S if timeout is None else timeout
        try:
            with sigterm_unwinds():
                return self._run(facts, limit)
        except OSError as exc:  # no temp space, a binary that cannot be executed, ...
            raise EngineUnavailable(f"cannot run souffle: {_cut(str(exc))}") from None

    def _run(self, facts: dict[str, list[tuple]], timeout: float) -> dict[str, list[tuple]]:
        with tempfile.TemporaryDirectory(prefix="ave-souffle-") as tmp:
            root = Path(tmp)
            in_dir, out_dir = root / "facts", root / "out"
            in_dir.mkdir()
            out_dir.mkdir()
            main = root / "main.dl"
            main.write_text("".join(f'#include "{Path(m.path).resolve()}"\n' for m in self.prog.files))
            for rel in self.prog.inputs:
                _write_facts(in_dir / f"{rel}.facts", facts.get(rel, []))
            cmd = [self.binary, "-F", str(in_dir), "-D", str(out_dir), "--wno=all", f"-j{self.jobs}", str(main)]
            try:
                proc = run_group(cmd, timeout, cwd=str(root))
            except Expired:
                raise EngineTimeout(f"souffle did not finish within {timeout:g} s") from None
            if proc.code != 0:
                raise self._error(proc.code, proc.stderr + proc.stdout, main)
            return {rel: self._read(out_dir / f"{rel}.csv", rel) for rel in sorted(self.prog.outputs)}

    def _read(self, path: Path, rel: str) -> list[tuple]:
        types = [self.prog.primitive(t) for _, t in self.prog.decls[rel].attrs]
        rows = []
        if not path.exists():
            raise EngineUnavailable(f"souffle exited 0 but wrote no output for {rel}: the Soufflé install looks "
                                    f"broken; use --engine embedded")
        # Soufflé writes symbols as raw bytes (substr can split a UTF-8 sequence): keep them lossless
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        lines = text.removesuffix("\n").split("\n") if text else []  # "\n" only: a symbol may hold a "\r"
        for n, line in enumerate(lines, 1):
            if not types:
                rows.append(())
                continue
            rows.append(_row(line, types, rel, n))
        rows.sort()
        return rows

    def _error(self, code: int, text: str, main: Path) -> RuleError:
        lines = text.splitlines()
        strat = re.search(r"has cyclic negation in file (?P<file>.+?) at line (?P<line>\d+)", text)
        if "Unable to stratify" in text and strat:  # point at the negation, as the linter does
            first = next(ln for ln in lines if "Unable to stratify" in ln)
            return RuleError(f"souffle: {first.removeprefix('Error: ')}",
                             self._span(strat.group("file"), int(strat.group("line")), 1, main))
        for i, line in enumerate(lines):
            m = _ERROR.match(line)
            if m and m.group(1) == "Error":
                col = 1
                if i + 2 < len(lines) and "^" in lines[i + 2]:
                    col = lines[i + 2].index("^") + 1
                return RuleError(f"souffle: {m.group('msg')}", self._span(m.group("file"), int(m.group("line")), col,
                                                                         main))
            m = _INCLUDE_ERR.match(line)
            if m:
                return RuleError(f"souffle preprocessor: {m.group('msg')}",
                                 self._span(m.group("file"), int(m.group("line")), 1, main))
        rt = _RUNTIME.search(text)
        if rt:
            first = lines[0] if lines else "runtime error"
            return RuleError(f"souffle runtime error: {first}",
                             self._span(rt.group("file"), int(rt.group("line")), int(rt.group("col")), main))
        summary = next((ln for ln in lines if ln.strip()), f"exit code {code}")
        what = "was killed (out of memory?)" if code in (137, -9) else f"failed with exit code {code}"
        return RuleError(f"souffle {what}: {_cut(summary)}", None)

    @staticmethod
    def _span(file: str, line: int, col: int, main: Path) -> Span | None:
        if Path(file).name == main.name:
            return None  # our generated include list, not a user file
        return Span(file, line, col, line, col + 1)


def _row(line: str, types: list[str], rel: str, n: int) -> tuple:
    """One tab-separated output line, checked: a 32-bit Soufflé writes exactly these cells."""
    cells = line.split("\t")
    if len(cells) != len(types):
        raise _malformed(rel, n, f"{len(cells)} cells for {len(types)} attributes")
    out: list = []
    for cell, typ in zip(cells, types):
        if typ == "number":
            if not re.fullmatch(r"-?[0-9]{1,10}", cell) or not INT_MIN <= int(cell) <= INT_MAX:
                raise _malformed(rel, n, f"{_cut(cell, 40)!r} is not a 32-bit number")
            out.append(int(cell))
        else:
            out.append(cell)
    return tuple(out)


def _malformed(rel: str, n: int, why: str) -> EngineUnavailable:
    return EngineUnavailable(f"souffle wrote a malformed line {n} of {rel}.csv ({why}): the Soufflé install looks "
                             f"broken; use --engine embedded")


def _cut(text: str, limit: int = MESSAGE_CHARS) -> str:
    """One line of at most `limit` characters, for a message quoting the engine's output."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
