"""Run by tests/test_parallel.py in a fresh process (forking helpers is only safe in a process
without JAX, which other tests load): checks one kernel with N jobs and prints one JSON line,
the report (no timings), how many findings helpers sent back and how many proofs this process
learned from them (the proof memo on). `--fault kill|raise` makes the
first obligation a helper decides kill the helper or raise a rule error there; `--fault
kill-counting` kills a helper counting a violation set."""
from __future__ import annotations

import argparse
import json
import os
import signal

from ave_decl import pipeline
from ave_decl.lang.errors import RuleError
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Finding
from ave_decl.solver import parallel, proof_memo, solve


def main() -> None:
    os.environ["AVE_PROOF_MEMO"] = "on"
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fault", choices=("kill", "raise", "kill-counting"))
    args = ap.parse_args()
    parent = os.getpid()
    from_helpers = [0]

    learned = [0]
    collect = parallel._collect

    def counted(fd: int):
        known = len(proof_memo.MEMO._proved)
        found = collect(fd)
        from_helpers[0] += sum(isinstance(v, Finding) for v in found[0].values())
        learned[0] += len(proof_memo.MEMO._proved) - known
        return found

    parallel._collect = counted
    discharge = solve.KernelSolver.discharge

    def faulty(self, *obligation):
        if os.getpid() != parent:
            if args.fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuleError("injected in a helper")
        return discharge(self, *obligation)

    count = parallel.violating_set

    def dying(query):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return count(query)

    if args.fault in ("kill", "raise"):
        solve.KernelSolver.discharge = faulty
    if args.fault == "kill-counting":
        parallel.violating_set = dying
    opts = pipeline.Options(jobs=args.jobs)
    report = pipeline.run([SourceFile.read(args.path)], opts)
    out = {"report": report.to_json(timings=False), "from_helpers": from_helpers[0], "learned": learned[0]}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
