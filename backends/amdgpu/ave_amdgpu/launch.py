"""Launch amdgpu kernels through HIP's module API with AMD's `hip-python` binding (the `hip` extra).

The code object (hsaco stage, linked by ld.lld) is loaded with `hipModuleLoadData`; arguments
follow the kernel ABI (ave_decl.codegen.abi) and are packed by hip-python's `extra` tuple, which
lays them out as the kernel's kernarg segment expects. Without ROCm, an AMD GPU or hip-python,
every entry point raises NoDevice with the reason (exit 2 from the CLI, a skip in tests). Never
run in this repository: no AMD GPU is available to the project (docs/backends.md).
"""
from __future__ import annotations

import ctypes
import time

import numpy as np

from ave_decl.codegen import CompiledKernel, LaunchFailed, NoDevice, TensorParam
from ave_decl.codegen.dtypes import NUMPY_STORAGE

_STATE: dict[str, object] = {}


def _hip():
    try:
        from hip import hip
    except ImportError as exc:
        raise NoDevice(f"hip-python is not installed (pip install 'ave-amdgpu[hip]', matching your ROCm): "
                       f"{exc}") from exc
    except Exception as exc:  # noqa: BLE001  (the binding loads libamdhip64 and fails in its own way without ROCm)
        raise NoDevice(f"HIP runtime not loadable here: {type(exc).__name__}: {exc}") from exc
    return hip


def _check(result, what: str, fault: bool = False):
    """The value of a HIP call; its error as NoDevice (set-up) or LaunchFailed (the kernel faulted)."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        cls = LaunchFailed if fault else NoDevice
        raise cls(f"{what} failed: HIP error {int(err)} ({getattr(err, 'name', err)})")
    return rest[0] if len(rest) == 1 else rest if rest else None


def device_problem() -> str | None:
    """None when an AMD GPU can run kernels here, else why not."""
    if "ready" in _STATE:
        return None
    try:
        hip = _hip()
        if int(_check(hip.hipGetDeviceCount(), "hipGetDeviceCount")) < 1:
            raise NoDevice("no AMD GPU here")
        _check(hip.hipSetDevice(0), "hipSetDevice")
    except NoDevice as exc:
        return exc.message
    _STATE["ready"] = True
    return None


def _function(compiled: CompiledKernel):
    if compiled.handle is None:
        problem = device_problem()
        if problem:
            raise NoDevice(problem)
        hip = _hip()
        if "hsaco" not in compiled.artifacts:
            raise NoDevice("the kernel was not linked into a code object (compile with stage hsaco)")
        module = _check(hip.hipModuleLoadData(compiled.artifacts["hsaco"].data), "hipModuleLoadData")
        fn = _check(hip.hipModuleGetFunction(module, compiled.name.encode()), "hipModuleGetFunction")
        compiled.handle = (module, fn)
    return compiled.handle[1]


def run_timed(compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int],
              repeats: int = 10) -> tuple[dict[str, np.ndarray], float | None]:
    """Run once for the result, then `repeats` more times between HIP events; (tensors, mean s)."""
    hip = _hip()
    fn = _function(compiled)
    host: dict = {}
    device: dict = {}
    try:
        extra = []
        for p in compiled.signature.params:
            if isinstance(p, TensorParam):
                arr = np.ascontiguousarray(arrays[p.name], dtype=NUMPY_STORAGE[p.dtype])
                ptr = _check(hip.hipMalloc(max(1, arr.nbytes)), "hipMalloc")
                host[p.name], device[p.name] = arr, ptr
                _check(hip.hipMemcpy(ptr, arr, arr.nbytes, hip.hipMemcpyKind.hipMemcpyHostToDevice), "hipMemcpy")
                extra.append(ptr)
            else:
                extra.append(ctypes.c_int(int(sizes[p])))
        grid = list(compiled.signature.grid_at(sizes)) + [1] * (3 - len(compiled.signature.grid))
        block = list(compiled.signature.block) + [1] * (3 - len(compiled.signature.block))

        def once() -> None:
            _check(hip.hipModuleLaunchKernel(fn, *grid, *block, sharedMemBytes=0, stream=None, kernelParams=None,
                                             extra=tuple(extra)), "hipModuleLaunchKernel")

        once()
        _check(hip.hipDeviceSynchronize(), "kernel execution", fault=True)
        seconds = None
        if repeats:
            start, stop = (_check(hip.hipEventCreate(), "hipEventCreate") for _ in range(2))
            _check(hip.hipEventRecord(start, None), "hipEventRecord")
            t0 = time.perf_counter()
            for _ in range(repeats):
                once()
            _check(hip.hipEventRecord(stop, None), "hipEventRecord")
            _check(hip.hipEventSynchronize(stop), "kernel execution", fault=True)
            ms = _check(hip.hipEventElapsedTime(start, stop), "hipEventElapsedTime")
            seconds = float(ms) / 1000.0 / repeats if ms is not None else (time.perf_counter() - t0) / repeats
        result = {}
        for name, arr in host.items():
            back = np.empty_like(arr)
            _check(hip.hipMemcpy(back, device[name], arr.nbytes, hip.hipMemcpyKind.hipMemcpyDeviceToHost), "hipMemcpy")
            result[name] = back
        return result, seconds
    finally:
        for ptr in device.values():
            hip.hipFree(ptr)


def launch(compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    out, _ = run_timed(compiled, arrays, sizes, repeats=0)
    return out
