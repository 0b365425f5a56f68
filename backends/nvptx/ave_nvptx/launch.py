"""Launch nvptx kernels through NVIDIA's `cuda-bindings` driver API (the `cuda` extra).

The PTX is loaded by the driver (`cuModuleLoadData`), so a driver older than the pip ptxas still
loads it; arguments follow the kernel ABI (ave_decl.codegen.abi). Without a GPU every entry point
raises NoDevice with the reason (exit 2 from the CLI, a skip in tests). Not yet run on a GPU in
this repository's CI: bench/device/h200.sh is the check (docs/backends.md).
"""
from __future__ import annotations

import ctypes
import time

import numpy as np

from ave_decl.codegen import CompiledKernel, LaunchFailed, NoDevice, TensorParam
from ave_decl.codegen.dtypes import NUMPY_STORAGE

_STATE: dict[str, object] = {}


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise NoDevice(f"cuda-bindings is not installed (pip install 'ave-nvptx[cuda]'): {exc}") from exc
    return driver


def _check(result, what: str, fault: bool = False):
    """The value of a driver call; its error as NoDevice (set-up) or LaunchFailed (the kernel ran and faulted)."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        cls = LaunchFailed if fault else NoDevice
        raise cls(f"{what} failed: CUDA error {int(err)} ({getattr(err, 'name', err)})")
    return rest[0] if len(rest) == 1 else rest


def _context():
    if "ctx" in _STATE:
        return _STATE["ctx"]
    driver = _driver()
    try:
        _check(driver.cuInit(0), "cuInit")
    except NoDevice:
        raise
    except Exception as exc:  # noqa: BLE001  (no libcuda: the loader raises its own error types)
        raise NoDevice(f"no NVIDIA driver here: {type(exc).__name__}: {exc}") from exc
    if int(_check(driver.cuDeviceGetCount(), "cuDeviceGetCount")) < 1:
        raise NoDevice("no NVIDIA GPU here")
    dev = _check(driver.cuDeviceGet(0), "cuDeviceGet")
    ctx = _check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _STATE["ctx"] = ctx
    return ctx


def device_problem() -> str | None:
    """None when a GPU can run kernels here, else why not."""
    try:
        _context()
    except NoDevice as exc:
        return exc.message
    return None


def _function(compiled: CompiledKernel):
    if compiled.handle is None:
        driver = _driver()
        _context()
        ptx = compiled.artifacts["ptx"].data
        module = _check(driver.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData (driver JIT of the PTX)")
        fn = _check(driver.cuModuleGetFunction(module, compiled.name.encode()), "cuModuleGetFunction")
        compiled.handle = (module, fn)
    return compiled.handle[1]


def _args(compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int], host: dict, device: dict):
    """Copy the tensors to the device (recording each allocation in `device` as it is made, so the
    caller frees them whatever fails) and build cuLaunchKernel's (values, types)."""
    driver = _driver()
    values, types = [], []
    for p in compiled.signature.params:
        if isinstance(p, TensorParam):
            arr = np.ascontiguousarray(arrays[p.name], dtype=NUMPY_STORAGE[p.dtype])
            ptr = _check(driver.cuMemAlloc(max(1, arr.nbytes)), "cuMemAlloc")
            host[p.name], device[p.name] = arr, ptr
            _check(driver.cuMemcpyHtoD(ptr, arr.ctypes.data, arr.nbytes), "cuMemcpyHtoD")
            values.append(ptr)
            types.append(None)
        else:
            values.append(int(sizes[p]))
            types.append(ctypes.c_int)
    return tuple(values), tuple(types)


def _launch_once(compiled: CompiledKernel, fn, params, sizes: dict[str, int]) -> None:
    driver = _driver()
    grid = list(compiled.signature.grid_at(sizes)) + [1] * (3 - len(compiled.signature.grid))
    block = list(compiled.signature.block) + [1] * (3 - len(compiled.signature.block))
    _check(driver.cuLaunchKernel(fn, *grid, *block, 0, 0, params, 0), "cuLaunchKernel")


def launch(compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, np.ndarray]:
    out, _ = run_timed(compiled, arrays, sizes, repeats=0)
    return out


def run_timed(compiled: CompiledKernel, arrays: dict[str, np.ndarray], sizes: dict[str, int],
              repeats: int = 10) -> tuple[dict[str, np.ndarray], float | None]:
    """Run once for the result, then `repeats` more times between CUDA events; (tensors, mean s)."""
    driver = _driver()
    fn = _function(compiled)
    host: dict = {}
    device: dict = {}
    try:
        params = _args(compiled, arrays, sizes, host, device)
        _launch_once(compiled, fn, params, sizes)
        _check(driver.cuCtxSynchronize(), "kernel execution", fault=True)
        seconds = None
        if repeats:
            start, stop = (_check(driver.cuEventCreate(0), "cuEventCreate") for _ in range(2))
            _check(driver.cuEventRecord(start, 0), "cuEventRecord")
            t0 = time.perf_counter()
            for _ in range(repeats):
                _launch_once(compiled, fn, params, sizes)
            _check(driver.cuEventRecord(stop, 0), "cuEventRecord")
            _check(driver.cuEventSynchronize(stop), "kernel execution", fault=True)
            ms = _check(driver.cuEventElapsedTime(start, stop), "cuEventElapsedTime")
            seconds = float(ms) / 1000.0 / repeats if ms is not None else (time.perf_counter() - t0) / repeats
        result = {}
        for name, arr in host.items():
            back = np.empty_like(arr)
            _check(driver.cuMemcpyDtoH(back.ctypes.data, device[name], arr.nbytes), "cuMemcpyDtoH")
            result[name] = back
        return result, seconds
    finally:
        for ptr in device.values():
            driver.cuMemFree(ptr)
