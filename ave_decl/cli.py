"""The `ave` command line (click). Exit codes are the same in every output mode (docs/cli.md)."""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import click

from .draw.commands import draw as draw_group
from .lang.errors import AveError, ExitCode, UsageError
from .version import __version__

_EXIT_HELP = ("Exit codes: 0 clean, 1 violation, 2 usage, 3 kernel front-end error, 4 rule error, "
              "5 inconclusive (UNKNOWN and no violation), 70 internal error, 130 interrupted (Ctrl-C).")

MAX_SECONDS = 86400.0  # one day: every duration option's upper bound (docs/cli.md)


class Seconds(click.ParamType):
    """A duration option: finite seconds in [minimum, MAX_SECONDS]. `nan` (which compares false
    with every bound, so click's FloatRange lets it through and it silently disables a limit),
    `inf` and `1e308` (past what a solver or a deadline can hold) are usage errors (exit 2)."""

    name = "seconds"

    def __init__(self, minimum: float):
        self.minimum = minimum

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            try:
                seconds = float(str(value).strip())
            except ValueError:
                self.fail(f"{str(value)[:40]!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        if not self.minimum <= seconds <= MAX_SECONDS:
            self.fail(f"{seconds:g} is not in [{self.minimum:g}, {MAX_SECONDS:g}] seconds", param, ctx)
        return seconds

    def __repr__(self) -> str:
        return f"Seconds({self.minimum:g}..{MAX_SECONDS:g})"



class _AveGroup(click.Group):
    """Maps click's usage errors to exit code 2 and never lets a traceback out."""

    def main(self, *args, **kwargs):
        kwargs.setdefault("standalone_mode", True)
        try:
            return super().main(*args, **kwargs)
        except SystemExit:
            raise
        except AveError as exc:
            click.echo(exc.one_line(), err=True)
            sys.exit(int(exc.exit_code))
        except Exception as exc:  # noqa: BLE001
            click.echo(f"error: internal error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(int(ExitCode.INTERNAL))

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *_plugin_commands()})

    def get_command(self, ctx, name):
        """Built-in commands, then those of installed plug-ins (entry point group `ave.commands`,
        e.g. `ave optimize` from ave-planner), loaded only when named or listed."""
        found = super().get_command(ctx, name)
        if found is None and name in _plugin_commands():
            try:
                found = _plugin_commands()[name].load()
            except Exception as exc:  # noqa: BLE001 - a broken plug-in must not break `ave`
                click.echo(f"warning: the plug-in command {name!r} does not load: {type(exc).__name__}: {exc}",
                           err=True)
                return None
        return found

    def invoke(self, ctx):
        """Ctrl-C is exit 130 (128 + SIGINT, the shell's convention): click's own "Aborted!" exits 1,
        which is the VIOLATION code, so a script could not tell an interrupted run from a violation."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))


def _plugin_commands() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="ave.commands")}


@click.group(cls=_AveGroup, epilog=_EXIT_HELP)
@click.version_option(__version__, prog_name="ave")
def main() -> None:
    """Ave: verify the data-flow invariants of GPU tile kernels."""


def _frozen_spec_gate(original: str, sources: list) -> None:
    """`check --frozen-spec`: one line per change of ORIGINAL's spec (lang/spec.py), then exit 1."""
    from .lang.spec import frozen_spec_changes
    from .pipeline import read_sources

    found, errs = read_sources([original])
    if errs or not found:
        raise UsageError(f"--frozen-spec {original}: {errs[0].message if errs else 'cannot read it'}")
    changes = [c for s in sources for c in frozen_spec_changes(found[0].text, s.text, found[0].path, s.path)]
    for c in changes:
        click.echo(c.one_line())
    if changes:
        sys.exit(int(ExitCode.VIOLATION))


@main.command(epilog=_EXIT_HELP)
@click.argument("files", nargs=-1, required=True, type=click.Path())  # a directory is reported per file
@click.option("--engine", type=click.Choice(["embedded", "souffle"]), default="embedded", show_default=True,
              help="Datalog engine: embedded (clingo, pip-installed) or souffle (subprocess).")
@click.option("--timeout", type=Seconds(0.001), default=10.0, show_default=True,
              help="Per-query solver timeout in seconds; a timeout is UNKNOWN, never VERIFIED.")
@click.option("--engine-timeout", type=Seconds(0.001), default=None,
              help="Wall-clock limit in seconds for the Datalog fixpoint; past it every kernel is UNKNOWN.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(exists=True),
              help="Extra directory of .dl invariant rules (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/json-schema.md).")
@click.option("--confirm", is_flag=True, help="Replay each counterexample in the simulator and show what meets.")
@click.option("--no-violation-sets", is_flag=True, help="Skip counting every violating lane/thread/slot.")
@click.option("--print-relation", "print_relations", multiple=True, metavar="REL",
              help="Also print the tuples of relation REL (a fact or a derived relation) for each kernel, with "
                   "source locations (repeatable; docs/writing-invariants.md).")
@click.option("--time", "show_time", is_flag=True, help="Per-phase timings per kernel and in total (stderr).")
@click.option("--no-timings", is_flag=True,
              help="Leave every measured time out of the report, so the same input gives byte-identical output.")
@click.option("-v", "--verbose", is_flag=True, help="Also list proved obligations.")
@click.option("--frozen-spec", "frozen_spec", type=click.Path(exists=True, dir_okay=False), default=None,
              metavar="ORIGINAL", help="Reject (exit 1, nothing checked) a file whose signature, reference, tags, "
                                       "assumes or assertions differ from ORIGINAL's, or that drops a tagged tensor.")
@click.option("--proof-cache", "proof_cache", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Remember proved queries in DIR/proofs and reuse them in later runs (agent loops: a candidate's "
                   "unchanged obligations are not solved again); also $AVE_PROOF_CACHE.")
@click.option("--max-errors", "max_errors", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop deciding a kernel's obligations once it has N errors (one a violation): the first N "
                   "findings and the verdict are those of the full check, the rest is not decided.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes deciding one kernel's obligations (default: the cores this process may use; the "
                   "report is the same for any N).")
def check(files: tuple[str, ...], engine: str, timeout: float, engine_timeout: float | None,
          rules_dirs: tuple[str, ...], as_json: bool, confirm: bool, no_violation_sets: bool, show_time: bool,
          verbose: bool, no_timings: bool = False, print_relations: tuple[str, ...] = (),
          frozen_spec: str | None = None, proof_cache: str | None = None, max_errors: int | None = None,
          jobs: int | None = None) -> None:
    """Check kernels (.ave files): VERIFIED, VIOLATION with a counterexample, UNKNOWN, or ERROR."""
    from .pipeline import Options, read_sources, run
    from .report.text import render
    from .solver.parallel import default_jobs

    if show_time and no_timings:
        raise click.UsageError("--time and --no-timings exclude each other")
    started = time.perf_counter()
    sources, errors = read_sources(list(files))
    if frozen_spec is not None:
        _frozen_spec_gate(frozen_spec, sources)
    opts = Options(engine, timeout, rules_dirs, engine_timeout, confirm, not no_violation_sets,
                   print_relations=tuple(print_relations),
                   proof_cache=proof_cache or os.environ.get("AVE_PROOF_CACHE") or None, max_errors=max_errors,
                   jobs=jobs or default_jobs())
    dumps: list = []  # --print-relation: one RelationDump per kernel and relation
    report = run(sources, opts, errors, dumps)
    for k in report.kernels:
        k.timings_ms["total"] = (time.perf_counter() - started) * 1000
    if as_json:
        data = report.to_json(timings=not no_timings)
        if print_relations:
            data["relations"] = [d.to_json() for d in dumps]
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(render(report, {s.path: s for s in sources}, verbose=verbose, timings=not no_timings), nl=False)
        if dumps:
            from .report.relations import render_relations

            click.echo(render_relations(dumps), nl=False)
    if show_time:
        from .report.text import render_timings

        click.echo(render_timings(report), err=True)
    sys.exit(report.exit_code)


@main.command(epilog=_EXIT_HELP)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for the Soufflé .facts files (created if missing).")
def facts(file: str, out_dir: str) -> None:
    """Write a kernel file's facts as Soufflé .facts files (one per input relation of rules/schema.dl)."""
    from .datalog.ruleset import load_rules
    from .facts.kernel_facts import merge, write_facts_dir
    from .pipeline import front_end, read_sources

    sources, errors = read_sources([file])
    for e in errors:
        click.echo(e.rendered, err=True)
        sys.exit(e.exit_code)
    fe = front_end(sources)
    for e in fe.errors:
        click.echo(e.rendered, err=True)
        sys.exit(e.exit_code)
    prog = load_rules()
    written = write_facts_dir(merge(fe.kernels), sorted(prog.inputs), Path(out_dir))
    click.echo(f"wrote {len(written)} relation files for {len(fe.kernels)} kernel(s) to {out_dir}")


@main.command(epilog=_EXIT_HELP)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--engine", type=click.Choice(["embedded", "souffle"]), default="embedded", show_default=True)
@click.option("--timeout", type=Seconds(0.001), default=10.0, show_default=True,
              help="Per-query solver timeout in seconds.")
@click.option("--file-timeout", type=Seconds(0.1), default=120.0, show_default=True,
              help="Wall-clock limit per file; past it the file is UNKNOWN and the audit goes on.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(exists=True), help="Extra rules directory.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False), help="Write the JSON report to FILE.")
@click.option("--sarif", "sarif_file", type=click.Path(dir_okay=False), help="Write a SARIF 2.1.0 log to FILE.")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), default=None,
              help="Write a static HTML report, DIR/index.html, with a heatmap per finding (implies --violation-sets).")
@click.option("--cache-dir", "--cache", "cache_dir", type=click.Path(file_okay=False), default=None,
              help="Verdict cache directory (default: $XDG_CACHE_HOME/ave; on Dask: shared with the workers).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Check on the Dask cluster of this scheduler (tcp://HOST:PORT; docs/auditing-at-scale.md).")
@click.option("--dask-local", type=click.IntRange(min=1), metavar="N", default=None,
              help="Check on a Dask LocalCluster of N worker processes started for this audit.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), help="Known findings: mark as unchanged.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Write the current findings as a baseline.")
@click.option("--confirm", is_flag=True, help="Replay counterexamples in the simulator.")
@click.option("--violation-sets", is_flag=True,
              help="Count and describe every violating lane/thread/slot (slower: many solver queries).")
@click.option("--time", "show_time", is_flag=True, help="Per-phase timings per kernel and in total.")
@click.option("--no-timings", is_flag=True,
              help="Leave every measured time out of the reports and the summary (byte-identical JSON).")
@click.option("-q", "--quiet", is_flag=True, help="Only the summary.")
@click.option("-v", "--verbose", is_flag=True, help="Also list proved obligations.")
def audit(paths, jobs, engine, timeout, file_timeout, rules_dirs, json_file, sarif_file, cache_dir, no_cache,
          baseline, write_baseline, confirm, violation_sets, show_time, quiet, verbose, no_timings=False,
          html_dir=None, scheduler=None, dask_local=None) -> None:
    """Audit every .ave file under PATHS: parallel, cached, one bad file never stops the rest."""
    if show_time and no_timings:
        raise click.UsageError("--time and --no-timings exclude each other")
    for option, value in (("--html", html_dir), ("--json", json_file), ("--sarif", sarif_file)):
        if value is not None and not value.strip():
            raise click.UsageError(f"{option} needs a path, got an empty one")
    from .audit.batch import AuditOptions
    from .audit.batch import audit as run_audit
    from .audit.cache import default_dir
    from .datalog.ruleset import load_rules, rule_metadata
    from .pipeline import Options
    from .report.sarif import to_sarif
    from .report.suppress import apply_baseline
    from .report.suppress import write_baseline as save_baseline
    from .report.text import render, render_timings

    opts = AuditOptions(Options(engine, timeout, tuple(rules_dirs), None, confirm, violation_sets or html_dir is not None),
                        jobs or (os.cpu_count() or 1),
                        file_timeout, None if no_cache else Path(cache_dir) if cache_dir else default_dir())
    runner = _dask_runner(scheduler, dask_local, jobs, tuple(rules_dirs))  # None: local worker processes
    bars: list = []
    if sys.stdout.isatty() and not quiet:
        from tqdm import tqdm

        def start(total: int) -> None:
            bars.append(tqdm(total=total, unit="file", leave=False))

        report, stats = run_audit(list(paths), opts, progress=lambda n: bars[0].update(n), start=start, runner=runner)
        bars[0].close()
    else:
        report, stats = run_audit(list(paths), opts, runner=runner)
    if baseline:
        apply_baseline(report, Path(baseline))
        from .pipeline import kernel_verdict

        for k in report.kernels:
            if k.findings:
                k.verdict = kernel_verdict(k.findings)
    if write_baseline:
        n = save_baseline(report, Path(write_baseline))
        click.echo(f"baseline: {n} finding(s) written to {write_baseline}", err=True)
    if json_file:
        _atomic_write(Path(json_file), json.dumps(report.to_json(timings=not no_timings), indent=2))
    if sarif_file:
        try:
            meta = rule_metadata(load_rules(tuple(rules_dirs)))
        except AveError:
            meta = {}
        _atomic_write(Path(sarif_file), json.dumps(to_sarif(report, meta, Path.cwd()), indent=2))
    if html_dir is not None:
        from .draw.html_report import write_report

        click.echo(f"html: wrote {write_report(report, Path(html_dir))}", err=True)
    if not quiet:
        click.echo(render(report, verbose=verbose, timings=not no_timings), nl=False)
    if show_time:
        click.echo(render_timings(report))
    s = report.summary()
    click.echo(f"audit: {stats.files} file(s), {len(report.kernels)} kernel(s): {s['verified']} verified, "
               f"{s['violation']} violation, {s['unknown']} unknown, {s['error']} error, {s['suppressed']} "
               f"suppressed; {stats.cached} from cache; " + ("" if no_timings else f"{stats.seconds:.2f} s ")
               + (f"({opts.jobs} job(s))" if runner is None else f"(Dask: {runner.width} worker thread(s))"))
    sys.exit(report.exit_code)


def _dask_runner(scheduler: str | None, workers: int | None, jobs: int | None, rules_dirs: tuple[str, ...]):
    """The Dask runner of --scheduler/--dask-local, closed with the command; None without them."""
    if scheduler is None and workers is None:
        return None
    if scheduler is not None and workers is not None:
        raise click.UsageError("--scheduler and --dask-local exclude each other")
    if jobs is not None:
        raise click.UsageError("-j counts local worker processes; on Dask the cluster's worker threads do the work")
    from .audit.distributed import dask_runner

    return click.get_current_context().with_resource(dask_runner(scheduler, workers, rules_dirs))


def _atomic_write(path: Path, text: str) -> None:
    _atomic_write_bytes(path, (text + "\n").encode())


_SIZE_VALUE = re.compile(r"-?[0-9]{1,30}")


def _parse_sizes(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not name.isidentifier() or not _SIZE_VALUE.fullmatch(value):
            shown = part if len(part) <= 40 else part[:40] + "…"
            raise click.BadParameter(f"expected NAME=INT (at most 30 digits), got {shown!r}", param_hint="--sizes")
        out[name] = int(value)
    return out


def _parse_blocks(text: str) -> list[tuple[int, ...]] | None:
    """'all', or one block's ids such as 1,0 (at most 3 non-negative integers)."""
    if text.strip() == "all":
        return None
    parts = [p.strip() for p in text.split(",")]
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"[0-9]{1,10}", p) for p in parts):
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise click.BadParameter(f"expected 'all' or up to 3 block ids such as 1,0; got {shown!r}",
                                 param_hint="--blocks")
    return [tuple(int(p) for p in parts)]


def _parse_max_memory(text: str | None) -> int | None:
    """--max-memory GIB: a positive, finite number of GiB (None: the default, sim/limits.py)."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and 0 < value <= 2 ** 20):
        raise click.BadParameter(f"expected a number of GiB in (0, 1048576], got {text[:40]!r}",
                                 param_hint="--max-memory")
    return int(value * 2 ** 30)


def _finite(x):
    """JSON has no inf/nan: a non-finite error measure is written as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _sim_status(r) -> tuple[str, str]:
    """(status, one-line summary) of one simulated kernel: the output against the reference and
    the shadow checks are separate verdicts, and the summary says which one failed."""
    ref = r.reference
    failed = [f for f in r.failures if f.failed]
    shadow = (f"{len(failed)} shadow check(s) failed: "
              + ", ".join(f"{f.invariant} at line {f.line} ({f.failed} of {f.checked})" for f in failed[:3])
              + (", ..." if len(failed) > 3 else "")) if failed else "every shadow check passed"
    if ref is None:
        output = "no reference declared"
    elif ref.get("ok"):
        output = "the output matches the reference"
    elif "mismatched" in ref:
        output = f"the output differs from the reference ({ref['mismatched']} of {ref['elements']} elements)"
    else:
        output = f"the output differs from the reference ({ref.get('why', 'not comparable')})"
    runtime = f"; {len(r.errors)} runtime error(s)" if r.errors else ""
    if ref is not None and not ref.get("ok"):
        status = "output-mismatch"
    elif failed:
        status = "shadow-failed"
    elif r.errors:
        status = "runtime-error"
    else:
        status = "ok"
    joint = ", but " if (status == "shadow-failed" and ref is not None) else "; "
    return status, f"{output}{joint}{shadow}{runtime}"


_SIM_LABEL = {"ok": "OK", "output-mismatch": "MISMATCH", "shadow-failed": "SHADOW", "runtime-error": "ERROR"}


@main.command(epilog="Exit codes: 0 outputs match the reference and every shadow check passes, 1 the output differs, "
                     "a shadow check failed or a runtime error (e.g. out of bounds), 2 usage (including sizes that "
                     "need more than --max-memory), 3 kernel front-end error or sizes the kernel rejects.")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--sizes", "sizes_text", default="",
              help="Symbolic sizes, e.g. M=128,N=128,K=64. Missing ones are the smallest the kernel admits "
                   "(its assume(...), a non-empty grid), found with Z3 and printed.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--blocks", default="all", show_default=True, help="'all' or one block's ids, e.g. 1,0.")
@click.option("--kernel", default=None, help="Only this kernel of the file.")
@click.option("--no-shadow", is_flag=True, help="Skip the shadow tag checks (faster).")
@click.option("--max-memory", "max_memory", default=None, metavar="GIB",
              help="Refuse sizes whose run needs more memory than this many GiB (default 4, or $AVE_SIM_MAX_MEMORY).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def simulate(file: str, sizes_text: str, seed: int, blocks: str, kernel: str | None, no_shadow: bool,
             as_json: bool, max_memory: str | None = None) -> None:
    """Run kernels concretely on random inputs; compare with their reference and check every tag assertion."""
    from .facts.lower import lower_module
    from .lang.errors import FrontEndError
    from .lang.parser import parse_source
    from .lang.reference import check_references
    from .lang.source import Span
    from .pipeline import read_sources
    from .sim.run import simulate_source
    from .solver.sizes import complete_sizes

    sizes = _parse_sizes(sizes_text)
    chosen_blocks = _parse_blocks(blocks)
    max_bytes = _parse_max_memory(max_memory)
    sources, errors = read_sources([file])
    for e in errors:
        click.echo(e.rendered)
        sys.exit(e.exit_code)
    src = sources[0]
    runs = []
    try:
        module = parse_source(src)
        check_references(module)  # a bad reference is refused before anything runs (exit 3)
        # the front end's checks (names, arities, constant arguments, launch shape) hold for the
        # simulator too: the interpreter walks the AST and trusts what the lowering accepts
        lowered = lower_module(module, src)
        if not module.kernels:
            raise FrontEndError("the file defines no kernel (a `@kernel(...)` function)", Span(file, 1, 1, 1, 2))
        if kernel is not None and kernel not in {k.name for k in module.kernels}:
            raise UsageError(f"{file} has no kernel named {kernel[:40]!r}")
        for plan in complete_sizes(src, sizes, kernel, module, lowered):
            for name, r in simulate_source(src, plan.sizes, kernel=plan.kernel, seed=seed, blocks=chosen_blocks,
                                           shadow=not no_shadow, max_bytes=max_bytes):
                runs.append((name, r, plan.chosen))
    except AveError as exc:
        click.echo(exc.render(src))
        sys.exit(int(exc.exit_code))
    except MemoryError:  # the up-front estimate (sim/limits.py) is a lower bound
        click.echo(f"{file}: error: ran out of memory simulating at these sizes; choose smaller --sizes")
        sys.exit(int(ExitCode.USAGE))
    bad = False
    report = []
    for name, r, picked in runs:
        status, summary = _sim_status(r)
        bad |= status != "ok"
        report.append({"kernel": name, "ok": status == "ok", "status": status, "summary": summary,
                       "sizes": r.sizes, "chosen_sizes": picked, "blocks": [list(b) for b in r.blocks],
                       "reference": r.reference, "errors": r.errors,
                       "shadow": [vars(f) for f in r.failures]})
    if as_json:
        click.echo(json.dumps(_finite({"version": "1.0", "file": file, "kernels": report}), indent=2))
    else:
        for k in report:
            click.echo(f"{_SIM_LABEL[k['status']]:9} {k['kernel']}{_at(k['sizes'])} ({len(k['blocks'])} blocks)")
            if k["chosen_sizes"]:
                picked = ", ".join(f"{n}={k['sizes'][n]}" for n in k["chosen_sizes"])
                click.echo(f"  sizes: {picked} chosen "
                           f"(the smallest meeting the kernel's assume(...) and launch; --sizes to choose)")
            click.echo(f"  = {k['summary']}")
            ref = k["reference"]
            if ref is None:
                click.echo("  reference: none declared (@kernel(..., reference=\"C = A @ B\"))")
            elif ref.get("scope") == "written" and ref.get("elements") == 0:
                click.echo(f"  reference {ref['output']} = {ref.get('expression', '')}: the simulated blocks "
                           f"write no element of {ref['output']}")
            elif "rel" in ref and "mismatched" in ref:
                click.echo(f"  reference {ref['output']} = {ref.get('expression', '')}: max abs error "
                           f"{ref['max_abs']:.3g}, relative {ref['rel']:.3g} (tolerance {ref['tol']:g}), "
                           f"{ref['mismatched']} of {ref['elements']} elements differ"
                           + (" (those the simulated blocks wrote)" if ref.get("scope") == "written" else ""))
            else:
                click.echo(f"  reference: {ref['why']}")
            for f in k["shadow"]:
                status = "ok" if not f["failed"] else f"FAILED {f['failed']} of {f['checked']}"
                click.echo(f"  shadow [{f['invariant']}] line {f['line']}: {status}"
                           + (f"; first: {f['first']}" if f["failed"] else f" ({f['checked']} checks)"))
            for e in k["errors"][:5]:
                click.echo(f"  error: {e}")
    sys.exit(1 if bad else 0)


def _at(sizes: dict[str, int]) -> str:
    """The ` at M=64, N=64` of a result line; empty for a kernel without symbolic sizes."""
    return " at " + ", ".join(f"{n}={v}" for n, v in sizes.items()) if sizes else ""


def _is_binary_stage(target: str, stage: str) -> bool:
    """Whether a backend says the stage's output is bytes (an unknown target is refused later)."""
    from .codegen import get_backend

    try:
        return stage in get_backend(target).binary_stages
    except AveError:
        return False


_EMIT_EXIT = ("Exit codes: 0 emitted, 1 the kernel has a violation, 5 it is not proven (both: --unverified "
              "emits anyway), 2 usage or a missing tool (ptxas), 3 kernel front-end error, 6 a construct the "
              "target cannot compile.")


@main.command(epilog=_EMIT_EXIT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--target", default="nvptx", show_default=True, help="Backend: host, nvptx, amdgpu, or an installed plug-in.")
@click.option("--arch", default=None, help="Target architecture (nvptx: sm_90a, sm_80; amdgpu: gfx942).")
@click.option("--stage", default=None, help="Last stage to run (nvptx: llir, ptx [default], cubin, sass; amdgpu: llir, asm [default], obj, hsaco; "
                   "host: llir [default], asm).")
@click.option("-o", "--output", "out", type=click.Path(), default=None,
              help="Write here (a directory when the file has several kernels) instead of stdout.")
@click.option("--kernel", default=None, help="Only this kernel of the file.")
@click.option("--unverified", is_flag=True, help="Compile even if the verifier does not say VERIFIED.")
@click.option("--timeout", type=Seconds(0.001), default=10.0, show_default=True,
              help="Solver time limit per query of the verification that gates the emission.")
def emit(file: str, target: str, arch: str | None, stage: str | None, out: str | None, kernel: str | None,
         unverified: bool, timeout: float) -> None:
    """Compile verified kernels for a target and print (or write) the chosen stage's output."""
    from .codegen import get_backend
    from .execute import compile_source

    src = _read_one(file)
    if out is None and stage is not None and _is_binary_stage(target, stage):  # before compiling for nothing
        click.echo(f"error: stage {stage} is binary: give -o FILE", err=True)
        sys.exit(int(ExitCode.USAGE))
    try:
        compiled = compile_source(src, target, arch, stage, kernel, unverified, timeout)
    except AveError as exc:
        click.echo(exc.render(src), err=True)
        sys.exit(int(exc.exit_code))
    for c in compiled:
        last = list(c.artifacts)[-1]
        art = c.artifacts[last]
        summary = get_backend(target).resource_summary(c)
        if summary:
            click.echo(f"{c.name}: {target} {c.arch}: {summary}", err=True)
        if out is None:
            if isinstance(art.data, bytes):
                click.echo(f"error: stage {last} is binary: give -o FILE", err=True)
                sys.exit(int(ExitCode.USAGE))
            click.echo(art.data, nl=not art.data.endswith("\n"))
            continue
        path = Path(out) / f"{c.name}{art.suffix}" if len(compiled) > 1 else Path(out)
        try:
            if len(compiled) > 1:
                Path(out).mkdir(parents=True, exist_ok=True)
            _atomic_write_bytes(path, art.data if isinstance(art.data, bytes) else art.data.encode())
        except OSError as exc:
            click.echo(f"error: cannot write {path}: {exc.strerror or exc}", err=True)
            sys.exit(int(ExitCode.USAGE))
        click.echo(f"{c.name}: wrote {path}", err=True)


_RUN_EXIT = ("Exit codes: 0 every output matches its reference, 1 an output differs, 2 usage, no device or "
             "missing tool, 3 kernel front-end error or sizes the kernel rejects, 5 not proven and 1 violation "
             "(without --unverified), 6 a construct the target cannot compile.")


@main.command("run", epilog=_RUN_EXIT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--target", default="host", show_default=True, help="Backend to run on: host (the CPU), nvptx or amdgpu (a GPU).")
@click.option("--arch", default=None, help="Target architecture.")
@click.option("--sizes", "sizes_text", default="", help="Symbolic sizes, e.g. M=64,N=64,K=64 (missing: the smallest).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--kernel", default=None, help="Only this kernel of the file.")
@click.option("--unverified", is_flag=True, help="Run even if the verifier does not say VERIFIED.")
@click.option("--timeout", type=Seconds(0.001), default=10.0, show_default=True, help="Solver time limit per query.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def run_cmd(file: str, target: str, arch: str | None, sizes_text: str, seed: int, kernel: str | None,
            unverified: bool, timeout: float, as_json: bool) -> None:
    """Compile verified kernels, run them on random inputs and compare with their references."""
    from .execute import run_source
    from .solver.sizes import complete_sizes

    sizes = _parse_sizes(sizes_text)
    src = _read_one(file)
    runs = []
    try:
        for plan in complete_sizes(src, sizes, kernel):
            runs += run_source(src, target, plan.sizes, plan.kernel, seed, arch, unverified, timeout)
    except AveError as exc:
        click.echo(exc.render(src), err=True)
        sys.exit(int(exc.exit_code))
    if as_json:
        click.echo(json.dumps(_finite({"version": "1.0", "file": file, "runs": [vars(r) for r in runs]}), indent=2))
    for r in runs:
        if as_json:
            break
        label = "ok" if r.ok else "no-ref" if r.ok is None else "MISMATCH"
        click.echo(f"{label:9} {r.kernel} on {r.target}{_at(r.sizes)} (verifier: {r.verdict})")
        c = r.comparison
        if c and "mismatched" in c:
            click.echo(f"  reference {c['output']}: max abs error {c['max_abs']:.3g}, relative {c['rel']:.3g} "
                       f"(tolerance {c['tol']:g}), {c['mismatched']} of {c['elements']} elements differ")
        elif c:  # compare() could not compare (evaluate_reference refuses another shape first)
            click.echo(f"  reference {c['output']}: {c.get('why', 'not comparable')}")
        click.echo(f"  compile {r.compile_s:.2f} s, run {r.run_s * 1e3:.1f} ms")
    sys.exit(1 if any(r.ok is False for r in runs) else 0)


def _read_one(file: str):
    from .pipeline import read_sources

    sources, errors = read_sources([file])
    for e in errors:
        click.echo(e.rendered, err=True)
        sys.exit(e.exit_code)
    return sources[0]


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """lang/files.write_atomic: a reader never sees half a file, a failed write leaves nothing
    behind, and `-o /dev/stdout` or a FIFO is written, not replaced by a file (one-line exit 2)."""
    from .lang.files import write_atomic

    write_atomic(path, data)


@main.command(epilog="Exit codes: 0 no failure found, 1 a failure was found (written to --out), 2 usage.")
@click.option("--transform", "spec", required=True, help="module:function, an AST -> AST transformation.")
@click.option("--examples", type=click.IntRange(min=1), default=25, show_default=True,
              help="Kernels to draw (before shrinking).")
@click.option("--seed", type=int, default=0, show_default=True, help="Reproduces a run.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="fuzz-failures", show_default=True)
@click.option("--no-simulate", is_flag=True, help="Only check printing and verification (faster).")
def fuzz(spec: str, examples: int, seed: int, out_dir: str, no_simulate: bool) -> None:
    """Fuzz a kernel transformation: outputs must print, verify and compute what the inputs compute."""
    from .testing.fuzz import fuzz as run_fuzz
    from .testing.fuzz import load_transform

    try:
        transform = load_transform(spec)
    except SyntaxError as exc:
        raise UsageError(f"cannot load --transform {spec}: {exc.filename}:{exc.lineno}:{exc.offset}: "
                         f"{exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module may raise anything while importing
        raise UsageError(f"cannot load --transform {spec}: {type(exc).__name__}: {exc}") from None
    if not callable(transform):
        raise UsageError(f"--transform {spec} is not a function (AST -> AST)")
    result = run_fuzz(transform, examples, seed, Path(out_dir), simulate=not no_simulate)
    if result.failure is None:
        click.echo(f"ok: no failure in {result.examples} kernels (seed {seed})")
        sys.exit(0)
    f = result.failure
    click.echo(f"FAILURE ({f.kind}) after {result.examples} kernels, shrunk to {f.case.spec}:")
    click.echo(f"  {f.message}")
    if f.detail:
        click.echo("  " + f.detail.splitlines()[0])
    click.echo(f"  reproduce: ave check {out_dir}/output.ave   (input: {out_dir}/input.ave, seed {seed})")
    sys.exit(1)


@main.group()
def rules() -> None:
    """Work with the Datalog rule files."""


@rules.command("lint")
@click.argument("dirs", nargs=-1, type=click.Path(exists=True))
def rules_lint(dirs: tuple[str, ...]) -> None:
    """Check rule files against the portable Soufflé profile (with the core rules)."""
    from .datalog.ruleset import load_rules

    prog = load_rules(tuple(dirs))
    click.echo(f"ok: {len(prog.files)} files, {len(prog.decls)} relations, {len(prog.rules)} rules")


main.add_command(draw_group)  # `ave draw` (ave_decl/draw/commands.py)

if __name__ == "__main__":
    main()
