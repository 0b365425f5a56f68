"""Element types of the language (shared by the front end, the lowering, the simulator and backends)."""
from __future__ import annotations

DTYPES = {"bf16", "f16", "f32", "f64", "fp8", "bf8", "i8", "i32", "u32", "i64"}

# Bytes per element (the shared-memory budget of a block is counted in these).
DTYPE_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "fp8": 1, "bf8": 1, "i8": 1, "i32": 4, "u32": 4, "i64": 8}
