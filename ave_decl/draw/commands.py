"""`ave draw`: the click group (registered by cli.py) for layouts, operand maps and findings."""
from __future__ import annotations

import functools
import sys

import click

_EXIT = ("Exit codes: 0 the picture was written, 2 usage (no such buffer, finding or instruction; PNG without "
         "the png extra), 3 kernel front-end error, 4 rule error.")
_OUT = [click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                     help="Write the picture to FILE (default: SVG on stdout)."),
        click.option("--format", "fmt", type=click.Choice(["svg", "png"]), default=None,
                     help="svg (default) or png (the png extra); default from the -o suffix.")]


def _outputs(f):
    """The -o/--format options, checked before the command does any work."""

    @functools.wraps(f)
    def checked(*args, **kwargs):
        from .output import picture_format

        picture_format(kwargs["output"], kwargs["fmt"])
        return f(*args, **kwargs)

    for option in reversed(_OUT):
        checked = option(checked)
    return checked


def _emit(svg: str, output: str | None, fmt: str | None) -> None:
    from .output import write_picture

    data = write_picture(svg, output, fmt)
    if data is not None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        click.echo(f"wrote {output}", err=True)


def _source(file: str):
    from ..lang.errors import UsageError
    from ..lang.source import SourceFile

    try:
        return SourceFile.read(file)
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror}") from None


@click.group()
def draw() -> None:
    """Draw a buffer's layout, an instruction's operand map or a finding's violating set (SVG/PNG)."""


@draw.command(epilog=_EXIT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--buffer", "buffer", required=True, help="The shared buffer to draw, e.g. As.")
@click.option("--kernel", default=None, help="The kernel declaring it, when several do.")
@click.option("--rows", type=click.IntRange(min=1), default=None, help="Draw only the first ROWS rows.")
@_outputs
def layout(file: str, buffer: str, kernel: str | None, rows: int | None, output: str | None, fmt: str | None) -> None:
    """A shared buffer's layout: each cell its storage offset, the fill its bank, swizzle phases per row."""
    from .kernel_info import find_buffer
    from .layout_picture import layout_svg

    info, buf = find_buffer(_source(file), buffer, kernel)
    _emit(layout_svg(buf, file, info.name, rows), output, fmt)


@draw.command(epilog=_EXIT)
@click.argument("instr", metavar="INSTR")
@_outputs
def operands(instr: str, output: str | None, fmt: str | None) -> None:
    """Which lane and register slot holds which element of A, B and C of a matrix instruction."""
    from .operands_picture import instruction, operands_svg

    _emit(operands_svg(instruction(instr)), output, fmt)


@draw.command(epilog=_EXIT)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--finding", "number", type=click.IntRange(min=1), default=1, show_default=True,
              help="Which finding: numbered as in the HTML report (those deciding the verdict first, then the rest).")
@_outputs
def finding(file: str, number: int, output: str | None, fmt: str | None) -> None:
    """A finding's violating set as a lane × slot heatmap, the counterexample marked, the chain beside it."""
    from ..pipeline import Options, read_sources, run
    from .finding_picture import finding_canvas, pick_finding
    from .kernel_info import kernels_of

    sources, errors = read_sources([file])
    report = run(sources, Options(violation_sets=True), errors)
    for err in report.errors:
        click.echo(err.rendered, err=True)
        sys.exit(err.exit_code)
    kernel, chosen = pick_finding(report.kernels, number, file)
    threads = None
    if chosen.violation_set is not None and chosen.violation_set["variables"] == ["thread", "value"]:
        threads = next(k.block_threads for k in kernels_of(sources[0]) if k.name == kernel.kernel)
    _emit(finding_canvas(number, chosen, sources[0], threads).to_string(), output, fmt)
