#!/usr/bin/env bash
# The GPU check of the amdgpu backend, as ONE prepared script for an MI300X (gfx942) machine with
# ROCm. No AMD GPU is available to this project, so this script has never run here: it is for a
# user who has one (docs/backends.md, "What is and is not proven for amdgpu").
#
#   bash bench/device/mi300x.sh           # from the repository root (it cds there itself)
#
# 1. rocminfo / rocm-smi: the GPU and the ROCm version (/opt/rocm/.info/version); stops (exit 2)
#    when there is no ROCm or no gfx942 agent.
# 2. ld.lld (the code-object linker): $AVE_LD_LLD, ROCm's /opt/rocm/llvm/bin/ld.lld, or a system one.
# 3. A venv outside the checkout ($AVE_MI300X_VENV, default /tmp/ave-mi300x-venv), reused when
#    present: pip install -e . -e backends/amdgpu with hip-python matching the ROCm version, then
#    torch for ROCm (the hipBLASLt yardstick only: without it the GEMM is timed alone).
# 4. bench/device/gpu_run.py --target amdgpu: every AMD example at several sizes against its
#    reference through hipModuleLoadData / hipModuleLaunchKernel, then the bf16 GEMM
#    (examples/speed/gemm_mfma_mi300x.ave) at 4096^3 and 8192^3 against torch.mm (hipBLASLt).
#    Results in $OUT/amdgpu_results.json if $OUT is set.
# Exit: the driver's (0 all ok, 1 a mismatch or error), 2 no GPU / ROCm, 3 an install failed.
set -uo pipefail

TOTAL_S=${AVE_MI300X_TOTAL_S:-900}
VENV=${AVE_MI300X_VENV:-/tmp/ave-mi300x-venv}
ROCM=${ROCM_PATH:-/opt/rocm}
cd "$(dirname "$0")/../.." || exit 2
START=$SECONDS
left() { echo $((TOTAL_S - (SECONDS - START))); }
step() { echo "== [$((SECONDS - START)) s] $*"; }
install_s() { local s=$(( $(left) - $1 )); [ "$s" -lt 30 ] && s=30; echo "$s"; }

step "ROCm and the GPU"
if ! command -v rocminfo >/dev/null 2>&1 && [ ! -x "$ROCM/bin/rocminfo" ]; then
    echo "no ROCm: rocminfo is not installed (set ROCM_PATH if ROCm is elsewhere); nothing was run" >&2
    exit 2
fi
ROCMINFO=$(command -v rocminfo || echo "$ROCM/bin/rocminfo")
if ! AGENTS=$("$ROCMINFO" 2>&1); then
    echo "$AGENTS" | tail -n 5
    echo "no GPU: rocminfo failed (driver not loaded or no device); nothing was run" >&2
    exit 2
fi
if ! echo "$AGENTS" | grep -q "gfx942"; then
    echo "$AGENTS" | grep -E "Marketing Name|Name: +gfx" || true
    echo "no gfx942 agent (MI300X/MI300A/MI325X): the amdgpu backend compiles for gfx942 only" >&2
    exit 2
fi
echo "$AGENTS" | grep -E "Marketing Name|Name: +gfx942" | sort -u
(command -v rocm-smi >/dev/null 2>&1 && rocm-smi --showproductname --showdriverversion) 2>/dev/null || true
ROCM_VERSION=$(sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' "$ROCM/.info/version" 2>/dev/null | head -n 1)
if [ -z "$ROCM_VERSION" ]; then
    echo "could not read $ROCM/.info/version; assuming ROCm 6.2"
    ROCM_VERSION=6.2
fi
ROCM_MAJOR=${ROCM_VERSION%%.*}
ROCM_MINOR=${ROCM_VERSION#*.}
HIP_PYTHON="hip-python>=$ROCM_MAJOR.$ROCM_MINOR,<$ROCM_MAJOR.$((ROCM_MINOR + 1))"
TORCH_INDEX="https://download.pytorch.org/whl/rocm$ROCM_VERSION"
echo "ROCm $ROCM_VERSION: $HIP_PYTHON, torch from $TORCH_INDEX"

step "ld.lld"
if [ -z "${AVE_LD_LLD:-}" ] && ! command -v ld.lld >/dev/null 2>&1 && [ -x "$ROCM/llvm/bin/ld.lld" ]; then
    export AVE_LD_LLD="$ROCM/llvm/bin/ld.lld"
fi
echo "${AVE_LD_LLD:-$(command -v ld.lld || echo 'ld.lld-NN on PATH or /usr/lib/llvm-NN/bin (the backend looks)')}"

step "python environment ($VENV)"
PY=""
for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        PY=$candidate
        break
    fi
done
if [ -z "$PY" ]; then
    echo "Python >= 3.11 is needed; set PYTHON=..." >&2
    exit 3
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || { echo "could not create a venv at $VENV" >&2; exit 3; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --progress-bar off -q)

step "pip install: ave-decl, ave-amdgpu, $HIP_PYTHON"
if "$VENV/bin/python" -c "import ave_decl, ave_amdgpu; from hip import hip" 2>/dev/null && [ -z "${AVE_MI300X_REINSTALL:-}" ]; then
    echo "already installed (editable); AVE_MI300X_REINSTALL=1 reinstalls"
elif ! timeout "$(install_s 300)" "${PIP[@]}" install -e . -e backends/amdgpu "$HIP_PYTHON"; then
    echo "installing the project or $HIP_PYTHON failed or ran out of time" >&2
    exit 3
fi

step "pip install: torch for ROCm $ROCM_VERSION (hipBLASLt yardstick)"
if "$VENV/bin/python" -c 'import torch, sys; sys.exit(not (torch.cuda.is_available() and torch.version.hip))' 2>/dev/null; then
    echo "torch with ROCm already installed"
elif [ "$(left)" -gt 400 ]; then
    timeout "$(install_s 300)" "${PIP[@]}" install torch --index-url "$TORCH_INDEX" \
        || echo "torch did not install: the GEMM is timed without the hipBLASLt comparison"
else
    echo "no time left for torch: the GEMM is timed without the hipBLASLt comparison"
fi
"$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "HIP", torch.version.hip, "available:", torch.cuda.is_available())' 2>/dev/null || true

BUDGET=$(( $(left) - 10 ))
step "check (budget $BUDGET s)"
if [ "$BUDGET" -lt 60 ]; then
    echo "less than a minute left after the installs: run again (the venv is reused)" >&2
    exit 3
fi
LOG=/dev/null
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    LOG="$OUT/amdgpu_log.txt"
fi
timeout "$BUDGET" "$VENV/bin/python" bench/device/gpu_run.py --target amdgpu --budget $((BUDGET - 15)) 2>&1 | tee "$LOG"
RC=${PIPESTATUS[0]}
step "done: exit $RC"
exit "$RC"
