"""`ave optimize` (an `ave.commands` entry point of ave-planner)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .errors import EXIT_NO_IMPROVEMENT, EXIT_USAGE, PlannerError
from .llm_agent import endpoint_configured

_EXIT = ("Exit codes: 0 a better kernel was accepted, 1 no candidate passed every gate and improved the "
         "estimate, 2 usage, 3 the input kernel does not parse or is not VERIFIED, 4 a knowledge-base file is "
         "invalid, 130 interrupted.")


def _sizes(value: str) -> dict[str, int]:
    import re

    out = {}
    for part in filter(None, value.split(",")):
        name, _, num = part.partition("=")
        if not name.strip().isidentifier() or not re.fullmatch(r"[0-9]{1,12}", num.strip()) or int(num) <= 0:
            raise click.BadParameter(f"{part!r} is not NAME=POSITIVE_INT")
        out[name.strip()] = int(num)
    return out


MODEL_SIZES = "M=4096,N=4096,K=4096,H=32,S=4096"
GATE_SIZES = "M=128,N=128,K=192,H=1,S=128"


def _used(defaults: str, text: str) -> str:
    """The default sizes whose names the kernel's tensor shapes use (a GEMM: M, N, K; attention: H, S)."""
    import re

    used = {n for dims in re.findall(r"Tensor\[\s*\w+\s*,\s*\(([^)]*)\)", text) for n in re.findall(r"[A-Za-z_]\w*", dims)}
    return ",".join(p for p in defaults.split(",") if p.split("=")[0] in used)


@click.command(epilog=_EXIT)
@click.argument("kernel", type=click.Path(dir_okay=False))
@click.option("--target", type=click.Choice(["amdgpu", "nvptx"]), default="amdgpu", show_default=True,
              help="the GPU the kernel is optimized for (the model's device and the instruction family)")
@click.option("--budget", type=click.IntRange(1, 1000), default=8, show_default=True, help="episodes")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="one directory per episode, best.ave, trajectory.json")
@click.option("--planner", "planner_name", type=click.Choice(["builtin", "llm"]), default="builtin",
              show_default=True, help="builtin: a bandit over the history; llm: an OpenAI-compatible endpoint")
@click.option("--sizes", default=None,
              help="where the model estimates [default: those of M=4096,N=4096,K=4096,H=32,S=4096 the kernel uses]")
@click.option("--gate-sizes", default=None,
              help="where the host run compares with the reference [default: those of M=128,N=128,K=192,H=1,S=128 "
                   "the kernel uses]")
@click.option("--measure/--no-measure", default=True, show_default=True,
              help="time each accepted kernel on the target's GPU at --sizes when one is present")
@click.option("--knowledge", type=click.Path(file_okay=False), default=None, help="another knowledge-base directory")
@click.option("--history", type=click.Path(dir_okay=False), default=None,
              help="episodes of earlier runs (JSONL), read by the planner and appended to; default: none (a run "
                   "depends on its input alone)")
def optimize(kernel, target, budget, out, planner_name, sizes, gate_sizes, measure, knowledge, history):
    """Optimize KERNEL with the knowledge base: every accepted step is VERIFIED, host-correct and
    faster by the model."""
    from .episode import Settings
    from .knowledge import load_knowledge
    from .model import DEVICE_OF_TARGET
    from .optimize import optimize as run
    from .policy import PLANNERS, History

    try:
        text = Path(kernel).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        click.echo(f"{kernel}: error: cannot read the kernel: {exc}", err=True)
        sys.exit(3)
    try:
        settings = Settings(target, DEVICE_OF_TARGET[target], _sizes(sizes or _used(MODEL_SIZES, text)),
                            _sizes(gate_sizes or _used(GATE_SIZES, text)), measure=measure)
    except click.BadParameter as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(EXIT_USAGE)
    if planner_name == "llm" and not endpoint_configured():
        click.echo("error: --planner llm needs an endpoint: set OPENAI_API_KEY (OpenAI's) or AVE_LLM_BASE_URL "
                   "(a local OpenAI-compatible server)", err=True)
        sys.exit(EXIT_USAGE)
    out_dir = Path(out) if out else None
    try:  # a place that cannot be written is a usage error before any episode runs
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / ".write-test").write_text("")
            (out_dir / ".write-test").unlink()
        if history:
            Path(history).parent.mkdir(parents=True, exist_ok=True)
            with Path(history).open("a", encoding="utf-8"):
                pass
    except OSError as exc:
        click.echo(f"error: cannot write {exc.filename}: {exc.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    hist = History(Path(history) if history else None)
    plain = not sys.stdout.isatty()
    try:
        kb = load_knowledge(knowledge)

        def progress(ep):
            est = f"{ep.estimate_s * 1e3:.3f} ms" if ep.estimate_s else "-"
            line = f"[{ep.index}/{budget}] {ep.technique} {ep.params}: {ep.outcome}"
            line += f" ({ep.gate}: {ep.reason})" if ep.outcome != "accepted" else f", estimate {est}"
            click.echo(line if plain else click.style(line, fg="green" if ep.outcome == "accepted" else None))

        result = run(text, kernel, kb, PLANNERS[planner_name](), settings, budget, hist, out_dir, progress)
    except PlannerError as exc:
        click.echo(exc.one_line(), err=True)
        sys.exit(exc.exit_code)
    click.echo("")
    measured = any(e.measured_s for e in result.episodes)
    click.echo(f"{'episode':>7}  {'technique':<20} {'parameters':<40} {'outcome':<15} {'estimate':>11}  speed-up"
               + ("   measured" if measured else ""))
    click.echo(f"{0:>7}  {'(input)':<20} {'':<40} {'':<15} {result.start_estimate.seconds * 1e3:>8.3f} ms  1.00x")
    for ep in result.episodes:
        est = f"{ep.estimate_s * 1e3:>8.3f} ms" if ep.estimate_s else f"{'-':>11}"
        sp = f"{ep.speedup:.2f}x" if ep.speedup else "-"
        params = ", ".join(f"{k}={v}" for k, v in ep.params.items())
        gpu = f"  {ep.measured_s * 1e3:>8.3f} ms" if ep.measured_s else ""
        click.echo(f"{ep.index:>7}  {ep.technique:<20} {params:<40} {ep.outcome:<15} {est}  {sp}{gpu}")
    if measure and result.measuring:
        click.echo(f"not timed on a GPU: {result.measuring}")
    total = result.start_estimate.seconds / result.best_estimate.seconds
    click.echo(f"best: {total:.2f}x the input by the model on {settings.device} at "
               f"{','.join(f'{k}={v}' for k, v in settings.sizes.items())}" + (f"; {out}/best.ave" if out else ""))
    sys.exit(0 if any(e.outcome == "accepted" for e in result.episodes) else EXIT_NO_IMPROVEMENT)
