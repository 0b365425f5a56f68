"""The linker that turns a relocatable object into a code object (`.hsaco`), and what the code
object's notes say. LLVM's linker is not in llvmlite: `ld.lld` comes from the system (Debian
`lld-19`; $AVE_LD_LLD overrides), and without one the hsaco stage stops with the reason."""
from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
from pathlib import Path

from ave_decl.codegen.errors import ToolchainError
from ave_decl.codegen.tools import run_tool

ENV = "AVE_LD_LLD"
INSTALL = "install LLVM's linker (Debian: apt-get install lld-19) or set AVE_LD_LLD"
_VERSIONED = re.compile(r"^ld\.lld-(\d+)$")
SYSTEM_DIRS = (Path("/usr/lib"),)  # where Debian's llvm-NN packages keep an unversioned ld.lld


def _versioned_on_path() -> list[Path]:
    """`ld.lld-NN` on PATH, newest first (Debian installs the versioned name only)."""
    found: dict[int, Path] = {}
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            m = _VERSIONED.match(name)
            path = Path(folder, name)
            if m and int(m.group(1)) not in found and os.access(path, os.X_OK):
                found[int(m.group(1))] = path
    return [found[v] for v in sorted(found, reverse=True)]


def locate_linker() -> Path:
    """$AVE_LD_LLD, else `ld.lld` on PATH, else the newest `ld.lld-NN` on PATH or in /usr/lib/llvm-NN/bin."""
    override = os.environ.get(ENV)
    if override:
        path = Path(override)
        if not path.is_file():
            raise ToolchainError(f"{ENV}={override} is not a file")
        return path
    plain = shutil.which("ld.lld")
    if plain:
        return Path(plain)
    system = [p for d in SYSTEM_DIRS for p in Path(d).glob("llvm-*/bin/ld.lld") if p.parts[-3][5:].isdigit()]
    candidates = _versioned_on_path() + sorted(system, key=lambda p: int(p.parts[-3][5:]), reverse=True)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise ToolchainError(f"no ld.lld here, so the hsaco stage cannot link a code object ({INSTALL}); "
                         "--stage obj gives the relocatable object")


def linker_problem() -> str | None:
    try:
        locate_linker()
    except ToolchainError as exc:
        return exc.message
    return None


def link(obj: bytes) -> bytes:
    """`ld.lld -shared` of one relocatable object: the code object HIP's module API loads."""
    lld = locate_linker()
    with tempfile.TemporaryDirectory(prefix="ave-lld-") as tmp:
        src, out = Path(tmp, "kernel.o"), Path(tmp, "kernel.hsaco")
        src.write_bytes(obj)
        run_tool([str(lld), "-shared", "--no-undefined", str(src), "-o", str(out)], "ld.lld")
        return out.read_bytes()


def notes(elf: bytes) -> list[tuple[str, int, bytes]]:
    """Every ELF note of a code object or object as (owner, type, descriptor bytes)."""
    from elftools.elf.elffile import ELFFile

    found = []
    for section in ELFFile(io.BytesIO(elf)).iter_sections():
        if section["sh_type"] != "SHT_NOTE":
            continue
        for note in section.iter_notes():
            desc = note["n_desc"]
            raw = desc if isinstance(desc, bytes) else str(desc).encode("latin-1", "replace")
            found.append((note["n_name"], note["n_type"] if isinstance(note["n_type"], int) else 0, raw))
    return found


_TARGET = re.compile(rb"amdgcn-amd-amdhsa--[A-Za-z0-9:+\-]+")


def code_object_target(elf: bytes) -> str:
    """The target id the AMDGPU metadata note records, e.g. amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-."""
    for owner, _, desc in notes(elf):
        if owner == "AMDGPU":
            m = _TARGET.search(desc)
            if m:
                return m.group(0).decode()
    raise ToolchainError("the code object has no AMDGPU metadata note naming its target")
