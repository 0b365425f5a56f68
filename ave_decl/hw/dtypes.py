"""Element types of the language (shared by the front end, the lowering, the simulator and backends)."""
from __future__ import annotations

DTYPES = {"bf16", "f16", "f32", "f64", "fp8", "bf8", "i8", "i32", "u32", "i64"}
