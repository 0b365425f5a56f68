"""What a picture needs from a kernel file beyond the report: its buffers' layouts, the threads of
a block, and which matrix instruction a statement calls. Read through the front end itself (the
lowering evaluates `layout=` exactly as the verifier does), so a bad file fails as `ave check` does.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from ..facts.lower import KernelLowering
from ..facts.values import Buffer
from ..hw.instructions import INSTRUCTIONS, Instruction
from ..lang.errors import FrontEndError, UsageError
from ..lang.parser import parse_source
from ..lang.resolve import resolve_imports
from ..lang.source import SourceFile, Span


@dataclass
class KernelInfo:
    name: str
    block_threads: int | None  # None when the block shape is symbolic
    group_size: int
    buffers: dict[str, Buffer]  # by source name (the first declaration of a name)


def kernels_of(src: SourceFile) -> list[KernelInfo]:
    """Every kernel of a file, lowered (FrontEndError, exit 3, for a bad file)."""
    module = parse_source(src)
    if not module.kernels:
        raise FrontEndError("the file defines no kernel (a `@kernel(...)` function)", Span(src.path, 1, 1, 1, 2))
    imports = resolve_imports(module)
    out = []
    for kid, k in enumerate(module.kernels):
        lowering = KernelLowering(k, kid, src, imports)
        lowering.lower()
        launch = lowering.launch
        buffers: dict[str, Buffer] = {}
        for buf in lowering.buffers.values():
            buffers.setdefault(buf.name, buf)
        threads = prod(launch.block_sizes) if launch.block_sizes else None
        out.append(KernelInfo(k.name, threads, launch.group_size, buffers))
    return out


def find_buffer(src: SourceFile, name: str, kernel: str | None = None) -> tuple[KernelInfo, Buffer]:
    """The buffer `name` (of `kernel`, or of the one kernel declaring it); UsageError naming the
    buffers there are otherwise."""
    kernels = [k for k in kernels_of(src) if kernel is None or k.name == kernel]
    if not kernels:
        raise UsageError(f"--kernel: {src.path} has no kernel {kernel!r}")
    holding = [k for k in kernels if name in k.buffers]
    if not holding:
        known = sorted({b for k in kernels for b, buf in k.buffers.items() if buf.space == "shared"})
        raise UsageError(f"--buffer: {src.path} has no buffer {name!r}"
                         + (f" (shared buffers: {', '.join(known)})" if known else " (it declares no shared buffer)"))
    if len(holding) > 1:
        raise UsageError(f"--buffer: {name!r} is declared in kernels {', '.join(k.name for k in holding)}; "
                         "name one with --kernel")
    return holding[0], holding[0].buffers[name]


def instruction_at(src: SourceFile | None, line: int, end_line: int) -> Instruction | None:
    """The matrix instruction called in source lines line..end_line (a K-pairing finding's site),
    else the only one the file calls anywhere (the site calls a `@device` helper that calls it)."""
    if src is None:
        return None
    site = _called(src.line_text(n) for n in range(line, max(line, end_line) + 1))
    if site:
        return INSTRUCTIONS[site[0]]
    anywhere = set(_called(src.text.split("\n")))
    return INSTRUCTIONS[anywhere.pop()] if len(anywhere) == 1 else None


_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _called(lines) -> list[str]:
    """The library instructions called in these lines, in order (comments left out)."""
    names = []
    for text in lines:
        code = text.split("#", 1)[0]
        names += [m.group(1) for m in _CALL.finditer(code) if m.group(1) in INSTRUCTIONS]
    return names
