"""The `ave` command line (click). Exit codes are the same in every output mode (docs/cli.md)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from .lang.errors import AveError, ExitCode, UsageError
from .version import __version__

_EXIT_HELP = ("Exit codes: 0 clean, 1 violation, 2 usage, 3 kernel front-end error, 4 rule error, "
              "5 inconclusive (UNKNOWN and no violation), 70 internal error.")


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


@click.group(cls=_AveGroup, epilog=_EXIT_HELP)
@click.version_option(__version__, prog_name="ave")
def main() -> None:
    """Ave: verify the data-flow invariants of GPU tile kernels."""


@main.command(epilog=_EXIT_HELP)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(["embedded", "souffle"]), default="embedded", show_default=True,
              help="Datalog engine: embedded (clingo, pip-installed) or souffle (subprocess).")
@click.option("--timeout", type=click.FloatRange(min=0.001), default=10.0, show_default=True,
              help="Per-query solver timeout in seconds; a timeout is UNKNOWN, never VERIFIED.")
@click.option("--engine-timeout", type=click.FloatRange(min=0.001), default=None,
              help="Wall-clock limit in seconds for the Datalog fixpoint; past it every kernel is UNKNOWN.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(exists=True),
              help="Extra directory of .dl invariant rules (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/json-schema.md).")
@click.option("--confirm", is_flag=True, help="Replay each counterexample in the simulator and show what meets.")
@click.option("--no-violation-sets", is_flag=True, help="Skip counting every violating lane/thread/slot.")
@click.option("--time", "show_time", is_flag=True, help="Per-phase timings per kernel and in total (stderr).")
@click.option("-v", "--verbose", is_flag=True, help="Also list proved obligations.")
def check(files: tuple[str, ...], engine: str, timeout: float, engine_timeout: float | None,
          rules_dirs: tuple[str, ...], as_json: bool, confirm: bool, no_violation_sets: bool, show_time: bool,
          verbose: bool) -> None:
    """Check kernels (.ave files): VERIFIED, VIOLATION with a counterexample, UNKNOWN, or ERROR."""
    from .pipeline import Options, read_sources, run
    from .report.text import render

    started = time.perf_counter()
    sources, errors = read_sources(list(files))
    opts = Options(engine, timeout, rules_dirs, engine_timeout, confirm, not no_violation_sets)
    report = run(sources, opts, errors)
    for k in report.kernels:
        k.timings_ms["total"] = (time.perf_counter() - started) * 1000
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(render(report, {s.path: s for s in sources}, verbose=verbose), nl=False)
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
@click.option("--timeout", type=click.FloatRange(min=0.001), default=10.0, show_default=True,
              help="Per-query solver timeout in seconds.")
@click.option("--file-timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              help="Wall-clock limit per file; past it the file is UNKNOWN and the audit goes on.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(exists=True), help="Extra rules directory.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False), help="Write the JSON report to FILE.")
@click.option("--sarif", "sarif_file", type=click.Path(dir_okay=False), help="Write a SARIF 2.1.0 log to FILE.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Verdict cache directory (default: $XDG_CACHE_HOME/ave).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False), help="Known findings: mark as unchanged.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Write the current findings as a baseline.")
@click.option("--confirm", is_flag=True, help="Replay counterexamples in the simulator.")
@click.option("--violation-sets", is_flag=True,
              help="Count and describe every violating lane/thread/slot (slower: many solver queries).")
@click.option("--time", "show_time", is_flag=True, help="Per-phase timings per kernel and in total.")
@click.option("-q", "--quiet", is_flag=True, help="Only the summary.")
@click.option("-v", "--verbose", is_flag=True, help="Also list proved obligations.")
def audit(paths, jobs, engine, timeout, file_timeout, rules_dirs, json_file, sarif_file, cache_dir, no_cache,
          baseline, write_baseline, confirm, violation_sets, show_time, quiet, verbose) -> None:
    """Audit every .ave file under PATHS: parallel, cached, one bad file never stops the rest."""
    from .audit.batch import AuditOptions
    from .audit.batch import audit as run_audit
    from .audit.cache import default_dir
    from .datalog.ruleset import load_rules, rule_metadata
    from .pipeline import Options
    from .report.sarif import to_sarif
    from .report.suppress import apply_baseline
    from .report.suppress import write_baseline as save_baseline
    from .report.text import render, render_timings

    opts = AuditOptions(Options(engine, timeout, tuple(rules_dirs), None, confirm, violation_sets),
                        jobs or (os.cpu_count() or 1),
                        file_timeout, None if no_cache else Path(cache_dir) if cache_dir else default_dir())
    bars: list = []
    if sys.stdout.isatty() and not quiet:
        from tqdm import tqdm

        def start(total: int) -> None:
            bars.append(tqdm(total=total, unit="file", leave=False))

        report, stats = run_audit(list(paths), opts, progress=lambda n: bars[0].update(n), start=start)
        bars[0].close()
    else:
        report, stats = run_audit(list(paths), opts)
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
        _atomic_write(Path(json_file), json.dumps(report.to_json(), indent=2))
    if sarif_file:
        try:
            meta = rule_metadata(load_rules(tuple(rules_dirs)))
        except AveError:
            meta = {}
        _atomic_write(Path(sarif_file), json.dumps(to_sarif(report, meta, Path.cwd()), indent=2))
    if not quiet:
        click.echo(render(report, verbose=verbose), nl=False)
    if show_time:
        click.echo(render_timings(report))
    s = report.summary()
    click.echo(f"audit: {stats.files} file(s), {len(report.kernels)} kernel(s): {s['verified']} verified, "
               f"{s['violation']} violation, {s['unknown']} unknown, {s['error']} error, {s['suppressed']} "
               f"suppressed; {stats.cached} from cache; {stats.seconds:.2f} s ({opts.jobs} job(s))")
    sys.exit(report.exit_code)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    tmp.replace(path)


def _parse_sizes(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if not name or not value.strip().lstrip("-").isdigit():
            raise click.BadParameter(f"expected NAME=INT, got {part!r}", param_hint="--sizes")
        out[name.strip()] = int(value)
    return out


@main.command(epilog="Exit codes: 0 outputs match the reference and every shadow check passes, 1 mismatch or "
                     "failed shadow check, 2 usage, 3 kernel front-end error or sizes the kernel rejects.")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--sizes", "sizes_text", default="", help="Symbolic sizes, e.g. M=128,N=128,K=64.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--blocks", default="all", show_default=True, help="'all' or one block's ids, e.g. 1,0.")
@click.option("--kernel", default=None, help="Only this kernel of the file.")
@click.option("--no-shadow", is_flag=True, help="Skip the shadow tag checks (faster).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def simulate(file: str, sizes_text: str, seed: int, blocks: str, kernel: str | None, no_shadow: bool,
             as_json: bool) -> None:
    """Run kernels concretely on random inputs; compare with their reference and check every tag assertion."""
    from .lang.errors import FrontEndError
    from .pipeline import read_sources
    from .sim.run import simulate_source

    sizes = _parse_sizes(sizes_text)
    chosen = None if blocks == "all" else [tuple(int(x) for x in blocks.split(","))]
    sources, errors = read_sources([file])
    for e in errors:
        click.echo(e.rendered)
        sys.exit(e.exit_code)
    try:
        runs = simulate_source(sources[0], sizes, kernel=kernel, seed=seed, blocks=chosen, shadow=not no_shadow)
    except FrontEndError as exc:
        click.echo(exc.render(sources[0]))
        sys.exit(int(exc.exit_code))
    bad = False
    report = []
    for name, r in runs:
        ok = (r.reference is None or r.reference["ok"]) and r.shadow_ok and not r.errors
        bad |= not ok
        report.append({"kernel": name, "ok": ok, "sizes": r.sizes, "blocks": [list(b) for b in r.blocks],
                       "reference": r.reference, "errors": r.errors,
                       "shadow": [vars(f) for f in r.failures]})
    if as_json:
        click.echo(json.dumps({"version": "1.0", "file": file, "kernels": report}, indent=2))
    else:
        for k in report:
            click.echo(f"{'OK' if k['ok'] else 'MISMATCH':9} {k['kernel']} at "
                       f"{', '.join(f'{n}={v}' for n, v in k['sizes'].items())} ({len(k['blocks'])} blocks)")
            ref = k["reference"]
            if ref is None:
                click.echo("  reference: none declared (@kernel(..., reference=\"C = A @ B\"))")
            elif "rel" in ref:
                click.echo(f"  reference {ref['output']} = {ref.get('expression', '')}: max abs error "
                           f"{ref['max_abs']:.3g}, relative {ref['rel']:.3g} (tolerance {ref['tol']:g}), "
                           f"{ref['mismatched']} of {ref['elements']} elements differ")
            else:
                click.echo(f"  reference: {ref['why']}")
            for f in k["shadow"]:
                status = "ok" if not f["failed"] else f"FAILED {f['failed']} of {f['checked']}"
                click.echo(f"  shadow [{f['invariant']}] line {f['line']}: {status}"
                           + (f"; first: {f['first']}" if f["failed"] else f" ({f['checked']} checks)"))
            for e in k["errors"][:5]:
                click.echo(f"  error: {e}")
    sys.exit(1 if bad else 0)


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


if __name__ == "__main__":
    main()
