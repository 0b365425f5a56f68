"""Regenerate the pictures in docs/img/ (README tour, docs/cli.md): `.venv/bin/python docs/img/regenerate.py`.

The `ave draw` pictures go through the real command (PNG needs the png extra); the HTML report's
screenshot is taken in headless Chromium (tests/browser.py), as the tests take theirs.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"
AVE = [sys.executable, "-m", "ave_decl.cli"]
DRAWINGS = {
    "draw_finding.png": ["finding", "examples/gemm_lds_mfma_transposed.ave", "--finding", "1"],
    "draw_finding_partial.png": ["finding", "examples/helpers/gemm_helpers_b_offset.ave", "--finding", "2"],
    "draw_finding_threads.png": ["finding", "examples/pipelines/gemm_pipelined3_wait2.ave", "--finding", "2"],
    "draw_layout.png": ["layout", "examples/gemm_lds_swizzled.ave", "--buffer", "As", "--rows", "16"],
    "draw_operands.png": ["operands", "mfma_f32_32x32x8_bf16"],
}
REPORT_CORPUS = ["examples/gemm_lds_mfma_transposed.ave", "examples/helpers/gemm_helpers_b_offset.ave",
                 "examples/gemm_naive.ave"]


def main() -> None:
    for name, args in DRAWINGS.items():
        subprocess.run(AVE + ["draw", *args, "-o", str(IMG / name)], cwd=ROOT, check=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import Browser, skip_reason

    if skip_reason():
        sys.exit(f"no screenshot of the HTML report: {skip_reason()}")
    work = Path(tempfile.mkdtemp(prefix="ave-docs-"))
    try:
        subprocess.run(AVE + ["audit", *REPORT_CORPUS, "--html", str(work), "--no-cache", "-q"], cwd=ROOT)
        browser = Browser(1280, 1500)
        try:
            browser.open(work / "index.html")
            browser.driver.save_screenshot(str(IMG / "audit_report.png"))
        finally:
            browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
