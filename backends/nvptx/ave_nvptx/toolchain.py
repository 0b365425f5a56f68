"""ptxas and nvdisasm from NVIDIA's pip packages (located inside the installed packages, not on
PATH), run with bounded time; `ptxas -v` gives the resource report (registers, shared memory,
spills)."""
from __future__ import annotations

import importlib.util
import os
import re
import tempfile
from pathlib import Path

from ave_decl.codegen.errors import ToolchainError
from ave_decl.codegen.tools import run_tool

ENV = {"ptxas": "AVE_PTXAS", "nvdisasm": "AVE_NVDISASM"}
PACKAGES = {"ptxas": "nvidia-cuda-nvcc-cu12", "nvdisasm": "nvidia-cuda-nvdisasm"}


def locate(tool: str) -> Path:
    """The tool from $AVE_<TOOL>, else from any `nvidia/*/bin/` of the installed NVIDIA packages."""
    override = os.environ.get(ENV[tool])
    if override:
        path = Path(override)
        if not path.is_file():
            raise ToolchainError(f"{ENV[tool]}={override} is not a file")
        return path
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        for candidate in sorted(Path(root).glob(f"*/bin/{tool}")):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    raise ToolchainError(f"{tool} not found: pip install {PACKAGES[tool]} (or: pip install 'ave-nvptx[toolchain]', "
                         f"or set {ENV[tool]})")


_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) bytes stack frame")


def assemble(ptx: str, arch: str) -> tuple[bytes, dict[str, int], str]:
    """PTX -> cubin with `ptxas -v`; returns the cubin, its resources and ptxas's report."""
    ptxas = locate("ptxas")
    with tempfile.TemporaryDirectory(prefix="ave-ptxas-") as tmp:
        src, out = Path(tmp, "kernel.ptx"), Path(tmp, "kernel.cubin")
        src.write_text(ptx)
        done = run_tool([str(ptxas), f"-arch={arch}", "-v", "-O3", str(src), "-o", str(out)], "ptxas")
        report = done.stderr + done.stdout
        resources = {}
        for key, pattern in (("registers", _USED), ("shared_bytes", _SMEM), ("stack_bytes", _STACK)):
            m = pattern.search(report)
            if m:
                resources[key] = int(m.group(1))
        m = _SPILL.search(report)
        if m:
            resources["spill_stores"], resources["spill_loads"] = int(m.group(1)), int(m.group(2))
        return out.read_bytes(), resources, report


def disassemble(cubin: bytes) -> str:
    nvdisasm = locate("nvdisasm")
    with tempfile.TemporaryDirectory(prefix="ave-nvdisasm-") as tmp:
        path = Path(tmp, "kernel.cubin")
        path.write_bytes(cubin)
        return run_tool([str(nvdisasm), "-c", str(path)], "nvdisasm").stdout
