#!/usr/bin/env bash
# The GPU check of the nvptx backend, as ONE prepared script for an H200 machine (at most ~8 min).
#
#   bash bench/device/h200.sh            # from the repository root (it cds there itself)
#
# 1. nvidia-smi: prints the driver and its CUDA version; stops (exit 2) when there is no driver.
# 2. A venv outside the checkout ($AVE_H200_VENV, default /tmp/ave-h200-venv), reused when present:
#    pip install -e . -e 'backends/nvptx[toolchain,cuda]' with cuda-bindings 12.x or 13.x chosen
#    from the driver's CUDA major version, then torch (a CUDA build, for the cuBLAS yardstick only:
#    a failed torch install leaves the check running without the comparison).
# 3. bench/device/gpu_run.py: every nvptx example at several sizes against its reference, then a
#    bf16 GEMM at 4096^3 and 8192^3 against cuBLAS. Results in $OUT/nvptx_results.json if $OUT is set.
# 4. `ave optimize examples/gemm_naive.ave --target nvptx --measure` (ave-planner, issue 14): every
#    accepted kernel timed on the GPU at the model's sizes beside the model's estimate, within
#    $AVE_H200_OPTIMIZE_S seconds (default 150, kept back from step 3); its table in the log and
#    its episodes under $OUT/optimize if $OUT is set. A timeout here does not change the exit code.
# Exit: the driver's (0 all ok, 1 a mismatch or error), 2 no GPU / driver, 3 an install failed.
set -uo pipefail

TOTAL_S=${AVE_H200_TOTAL_S:-470}   # the whole script, installs included
OPTIMIZE_S=${AVE_H200_OPTIMIZE_S:-150}   # step 4 (ave optimize --measure)
VENV=${AVE_H200_VENV:-/tmp/ave-h200-venv}
cd "$(dirname "$0")/../.." || exit 2
START=$SECONDS
left() { echo $((TOTAL_S - (SECONDS - START))); }
step() { echo "== [$((SECONDS - START)) s] $*"; }
# seconds an install may take: what is left less $1 kept for what follows (at least 30)
install_s() { local s=$(( $(left) - $1 )); [ "$s" -lt 30 ] && s=30; echo "$s"; }

step "driver"
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "no GPU: nvidia-smi is not installed (no NVIDIA driver on this machine); nothing was run" >&2
    exit 2
fi
if ! SMI=$(nvidia-smi 2>&1); then
    echo "$SMI"
    echo "no GPU: nvidia-smi failed (driver not loaded or no device); nothing was run" >&2
    exit 2
fi
echo "$SMI"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
CUDA_VERSION=$(echo "$SMI" | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)
CUDA_MAJOR=${CUDA_VERSION%%.*}
if [ -z "$CUDA_VERSION" ]; then
    echo "could not read the driver's CUDA version from nvidia-smi; assuming 12.x"
    CUDA_MAJOR=12
fi
if [ "$CUDA_MAJOR" -ge 13 ]; then
    BINDINGS='cuda-bindings>=13,<14'
    BINDINGS_MAJOR=13
    TORCH='torch'
else
    BINDINGS='cuda-bindings>=12.4,<13'
    BINDINGS_MAJOR=12
    TORCH='torch<2.10'   # PyPI builds for CUDA 12 (newer defaults may need a CUDA 13 driver)
fi
echo "driver CUDA $CUDA_VERSION: $BINDINGS, $TORCH"

step "python environment ($VENV)"
PY=""
for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        PY=$candidate
        break
    fi
done
if [ -z "$PY" ]; then
    echo "Python >= 3.11 is needed (python3 is $(python3 --version 2>&1)); set PYTHON=..." >&2
    exit 3
fi
echo "$PY: $("$PY" --version 2>&1)"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV" || { echo "could not create a venv at $VENV (python3-venv missing?)" >&2; exit 3; }
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --progress-bar off -q)

step "pip install: ave-decl, ave-nvptx[toolchain,cuda], ave-planner, $BINDINGS"
INSTALLED="import ave_decl, ave_nvptx, ave_planner, cuda.bindings, sys; sys.exit(cuda.bindings.__version__.split('.')[0] != '$BINDINGS_MAJOR')"
if "$VENV/bin/python" -c "$INSTALLED" 2>/dev/null && [ -z "${AVE_H200_REINSTALL:-}" ]; then
    echo "already installed (editable: the checkout's code is what runs); AVE_H200_REINSTALL=1 reinstalls"
else
    if ! timeout "$(install_s 150)" "${PIP[@]}" install -e . -e 'backends/nvptx[toolchain,cuda]' -e planner "$BINDINGS"; then
        echo "installing the project failed or ran out of time" >&2
        exit 3
    fi
fi

step "pip install: $TORCH (cuBLAS yardstick)"
if "$VENV/bin/python" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    echo "torch with CUDA already installed"
elif [ "$(left)" -gt 200 ]; then
    timeout "$(install_s 150)" "${PIP[@]}" install "$TORCH" \
        || echo "torch did not install in time: the GEMM is timed without the cuBLAS comparison"
else
    echo "no time left for torch: the GEMM is timed without the cuBLAS comparison"
fi
"$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "available:", torch.cuda.is_available())' 2>/dev/null || true
"$VENV/bin/python" -c 'import cuda.bindings; print("cuda-bindings", cuda.bindings.__version__)' 2>/dev/null || true

BUDGET=$(( $(left) - 10 - OPTIMIZE_S ))
step "check (budget $BUDGET s)"
if [ "$BUDGET" -lt 60 ]; then
    echo "less than a minute left after the installs: run again (the venv is reused)" >&2
    exit 3
fi
LOG=/dev/null
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    LOG="$OUT/h200_log.txt"
fi
timeout "$BUDGET" "$VENV/bin/python" bench/device/gpu_run.py --target nvptx --budget $((BUDGET - 15)) 2>&1 | tee "$LOG"
RC=${PIPESTATUS[0]}

OPT_S=$(( $(left) - 5 ))
step "ave optimize examples/gemm_naive.ave --target nvptx --measure (budget $OPT_S s)"
OPT_OUT=/tmp/ave-h200-optimize
[ -n "${OUT:-}" ] && OPT_OUT="$OUT/optimize"
if [ "$OPT_S" -ge 30 ]; then
    timeout "$OPT_S" "$VENV/bin/ave" optimize examples/gemm_naive.ave --target nvptx --budget 8 --measure \
        --out "$OPT_OUT" 2>&1 | tee -a "$LOG"
    echo "ave optimize: exit ${PIPESTATUS[0]} (124: out of time; its finished episodes are in $OPT_OUT)"
else
    echo "no time left for ave optimize"
fi
step "done: exit $RC"
exit "$RC"
