"""Run by tests/test_parallel.py in a fresh process (forking helpers is only safe in a process
without JAX, which other tests load): checks one kernel with N jobs and prints one JSON line,
the report (no timings), how many findings helpers sent back, how many violation sets helpers
counted while this process went on deciding (solver/parallel.py's `_SetsAhead`) and how many
proofs this process learned from them (the proof memo on). Faults: `kill` (a helper kills itself at its first
obligation), `raise` (every process raises at the kernel's bank-conflict obligations),
`kill-counting` (a helper kills itself counting a violation set), `no-fork` (os.fork fails),
`orphan` (this process prints its helpers' pids and kills itself once they are forked)."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from ave_decl import pipeline
from ave_decl.lang.source import SourceFile
from ave_decl.report.model import Finding
from ave_decl.solver import parallel, proof_memo, solve


def main() -> None:
    os.environ["AVE_PROOF_MEMO"] = "on"
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fault", choices=("kill", "raise", "kill-counting", "no-fork", "orphan"))
    args = ap.parse_args()
    parent = os.getpid()
    from_helpers, learned, sets_ahead = [0], [0], [0]
    collect_ahead = parallel._SetsAhead.collect
    collect, discharge, count, fork_helper = parallel._collect, solve.KernelSolver.discharge, \
        parallel.violating_set, parallel._fork_helper

    def counted(fd: int):
        known = len(proof_memo.MEMO._proved)
        found = collect(fd)
        from_helpers[0] += sum(isinstance(v, Finding) for v in found[0].values())
        learned[0] += len(proof_memo.MEMO._proved) - known
        return found

    def faulty(self, site, inv, relation, lhs, rhs):
        if args.fault == "kill" and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        if args.fault == "raise" and relation == "bank_conflicts":
            raise KeyError("injected")
        return discharge(self, site, inv, relation, lhs, rhs)

    def dying(query):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return count(query)

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    def orphaning(queue, run, extra, helpers):
        made = fork_helper(queue, run, extra, helpers)
        print(json.dumps({"helpers": [pid for pid, _fd in helpers]}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        return made

    def counted_ahead(self):
        found = collect_ahead(self)
        sets_ahead[0] += len(found)
        return found

    parallel._collect = counted
    parallel._SetsAhead.collect = counted_ahead
    solve.KernelSolver.discharge = faulty
    if args.fault == "kill-counting":
        parallel.violating_set = dying
    if args.fault == "no-fork":
        os.fork = no_fork
    if args.fault == "orphan":
        parallel._fork_helper = orphaning
    report = pipeline.run([SourceFile.read(args.path)], pipeline.Options(jobs=args.jobs))
    out = {"report": report.to_json(timings=False), "from_helpers": from_helpers[0], "learned": learned[0],
           "sets_ahead": sets_ahead[0]}
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
