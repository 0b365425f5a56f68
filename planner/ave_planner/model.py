"""An analytical performance model: an estimate of a kernel's time at a launch size, no GPU needed.

It walks the kernel once with the sizes bound, weighting each statement by the trip counts of
its loops, and evaluates every memory access's address for the lanes of one wave at a concrete
point (ids, loop variables at their first values) — so the sectors a global access touches, the
bank-conflict degree of a shared access and the contiguous run a thread's consecutive iterations
cover (a vector instruction after the backend's load/store vectoriser) come from the index
expressions themselves. Terms (seconds): `dram` (each tensor's footprint once over HBM), `l2`
(the 32-byte sectors every global access instruction touches, over the L2 bandwidth), `issue`
(global memory instructions per CU), `lds` (shared-memory wavefronts including conflict
replays), `mma` and `fma` (matrix and scalar multiply-adds over their peaks). Without an async
copy in a loop, memory and compute add up; with one (a pipeline) they overlap: `max`. Memory
time is stretched when too few threads are resident to hide its latency (occupancy.py).
Blind spots (docs/planner.md): no L1 or register reuse across blocks, latency only through
occupancy, no instruction scheduling, no tails; the ranking is what it is for, not the absolute figure.
"""
from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources

from ave_decl.hw.instructions import INSTRUCTIONS
from ave_decl.lang import ast as A
from ave_decl.lang.parser import parse_text
from ave_decl.transform.ast_rewrite import walk

from .occupancy import kernel_resources, latency_factor, occupancy

TERMS = ("dram", "l2", "issue", "lds", "mma", "fma", "sfu")
_SFU = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh"}  # transcendental: the special-function units
_DATA_FN = _SFU | {"fmax", "fmin", "select", "abs", "cast", "lane_max", "lane_sum", "shuffle_xor", "shuffle"}
_ONE_FLOP = {"fmax", "fmin", "select"}
_ESIZE = {"f32": 4, "bf16": 2, "f16": 2, "fp8": 1, "bf8": 1, "i32": 4, "int32": 4, "i8": 1, "u8": 1, "i16": 2}


def devices() -> dict[str, dict]:
    return tomllib.loads(resources.files("ave_planner").joinpath("data/devices.toml").read_text("utf-8"))


DEVICE_OF_TARGET = {"nvptx": "h200", "amdgpu": "mi300x"}


@dataclass
class Estimate:
    seconds: float
    terms: dict[str, float]
    counts: dict[str, float] = field(default_factory=dict)
    overlapped: bool = False
    device: str = ""
    occupancy: dict = field(default_factory=dict)  # Occupancy.to_json() and the latency factor applied

    @property
    def bound(self) -> str:
        return max(self.terms, key=lambda k: self.terms[k])

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "bound": self.bound, "overlapped": self.overlapped, "device": self.device,
                "terms": dict(self.terms), "counts": dict(self.counts), "occupancy": dict(self.occupancy)}


class _Unknown(Exception):
    """An expression the model cannot evaluate at the concrete point."""


@dataclass
class _Walk:
    sizes: dict[str, int]
    tensors: dict[str, tuple[str, tuple[A.Expr, ...]]]  # global tensors: dtype, shape
    shared: dict[str, tuple[str, tuple[int, ...]]]  # shared buffers: dtype, shape
    group: int
    block: tuple[int, ...]
    layouts: dict[str, object] = field(default_factory=dict)  # shared buffer -> its layout, when given
    defs: dict[str, A.Expr] = field(default_factory=dict)
    loops: list[tuple[str, int, int, int]] = field(default_factory=list)  # var, lo, step, trip
    counts: dict[str, float] = field(default_factory=lambda: {k: 0.0 for k in
                                                              ("global_instr", "global_sectors", "lds_wavefronts",
                                                               "mma_flops", "fma_flops", "sfu_ops",
                                                               "shared_bytes")})
    async_in_loop: bool = False
    grid: tuple[int, ...] = (1,)
    data_names: set[str] = field(default_factory=set)  # scalars that hold data (not index arithmetic)
    registers: set[str] = field(default_factory=set)  # register arrays (`local(...)`)
    prefetched: set[str] = field(default_factory=set)  # register arrays stored from a global load

    # ------------------------------------------------------------ evaluation
    def value(self, e: A.Expr, env: dict[str, int]) -> int:
        if isinstance(e, A.Int):
            return e.value
        if isinstance(e, A.Name):
            if e.id in env:
                return env[e.id]
            if e.id in self.sizes:
                return self.sizes[e.id]
            if e.id in self.defs:
                return self.value(self.defs[e.id], env)
            raise _Unknown(e.id)
        if isinstance(e, A.BinOp):
            x, y = self.value(e.left, env), self.value(e.right, env)
            if e.op in ("<<", ">>") and not 0 <= y < 64:
                raise _Unknown("a shift")
            ops = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "//": lambda: x // y if y else 0,
                   "%": lambda: x % y if y else 0, "^": lambda: x ^ y, "&": lambda: x & y, "|": lambda: x | y,
                   "<<": lambda: x << y, ">>": lambda: x >> y}
            if e.op in ops:
                r = ops[e.op]()
                if abs(r) >= 1 << 62:
                    raise _Unknown("a value past 62 bits")
                return r
        if isinstance(e, A.UnaryOp) and e.op in ("-", "+"):
            v = self.value(e.operand, env)
            return -v if e.op == "-" else v
        if isinstance(e, A.Call) and isinstance(e.func, A.Name):
            n = e.func.id
            args = [self.value(a, env) for a in e.args] if n in ("min", "max") else []
            if n in ("min", "max"):
                return (min if n == "min" else max)(args)
            if n in ("thread_id", "block_id", "lane_id", "wave_id", "warp_id"):
                key = n if not e.args else f"{n}({self.value(e.args[0], {})})"
                return env.get(key, 0)
        raise _Unknown(type(e).__name__)

    def lane_env(self, lane: int, env: dict[str, int]) -> dict[str, int]:
        """Thread `lane` of the first wave of block 0 (x fastest, as the hardware numbers threads)."""
        out = dict(env)
        bx = self.block[0]
        out.update({"thread_id(0)": lane % bx, "thread_id(1)": lane // bx if len(self.block) > 1 else 0,
                    "lane_id": lane % self.group, "wave_id": 0, "warp_id": 0})
        return out

    # ------------------------------------------------------------ accesses
    def flat(self, sub: A.Subscript, shape: tuple[int, ...], env: dict[str, int]) -> int:
        layout = self.layouts.get(sub.value.id) if isinstance(sub.value, A.Name) else None
        if layout is not None:
            return layout(*(self.value(i, env) for i in sub.indices))  # type: ignore[operator]
        off = 0
        for idx, ext in zip(sub.indices, shape):
            off = off * ext + self.value(idx, env)
        return off

    def global_access(self, sub: A.Subscript, weight: float, env: dict[str, int]) -> None:
        dtype, shape_e = self.tensors[sub.value.id]  # type: ignore[union-attr]
        esize = _ESIZE.get(dtype, 4)
        try:
            shape = tuple(self.value(s, {}) for s in shape_e)
            run = self.run_length(sub, shape, env, esize)
            starts = [self.flat(sub, shape, self.lane_env(lane, env)) * esize for lane in range(self.group)]
        except _Unknown:
            starts, run = [lane * esize for lane in range(self.group)], 1
        sectors = len({(a + b) // 32 for a in starts for b in range(0, run * esize, min(32, run * esize))})
        instrs = weight / self.group / run
        self.counts["global_instr"] += instrs
        self.counts["global_sectors"] += instrs * sectors

    def run_length(self, sub: A.Subscript, shape: tuple[int, ...], env: dict[str, int], esize: int) -> int:
        """How many consecutive iterations of the innermost loop one thread's access covers
        contiguously (from an aligned start), up to 16 bytes: what the vectoriser merges."""
        if not self.loops:
            return 1
        var, lo, step, trip = self.loops[-1]
        base = self.lane_env(0, env)
        start = self.flat(sub, shape, {**base, var: lo})
        run = 1
        while run < trip and run * esize < 16:
            if self.flat(sub, shape, {**base, var: lo + run * step}) != start + run:
                break
            run += 1
        while run > 1 and (trip % run or start % run):
            run -= 1
        return run

    def shared_access(self, sub: A.Subscript, weight: float, env: dict[str, int], lanes_per_phase: int = 32) -> None:
        dtype, shape = self.shared[sub.value.id]  # type: ignore[union-attr]
        esize = _ESIZE.get(dtype, 4)
        try:
            run = self.run_length(sub, shape, env, esize)
            starts = [self.flat(sub, shape, self.lane_env(lane, env)) for lane in range(self.group)]
        except _Unknown:
            starts, run = list(range(self.group)), 1
        degree = 0
        for p in range(0, self.group, lanes_per_phase):
            banks: dict[int, set[int]] = {}
            for a in starts[p:p + lanes_per_phase]:
                for w in {(a + j) * esize // 4 for j in range(run)}:
                    banks.setdefault(w % 32, set()).add(w)
            degree += max(len(v) for v in banks.values())
        self.counts["lds_wavefronts"] += weight / self.group / run * degree
        self.counts["shared_bytes"] += weight * esize

    def hoisted(self, sub: A.Subscript, weight: float) -> float:
        """A load whose address does not change in the innermost loops is loaded once per
        iteration of the first loop it depends on (loop-invariant code motion at -O3)."""
        used = self.names(sub)
        for var, _, _, trip in reversed(self.loops):
            if var in used:
                break
            weight /= max(trip, 1)
        return weight

    def names(self, e) -> set[str]:
        """The names an expression depends on, through the definitions of the names it reads."""
        out: set[str] = set()
        stack = [e]
        while stack:
            for n in walk(stack.pop()):
                if isinstance(n, A.Name) and n.id not in out:
                    out.add(n.id)
                    if n.id in self.defs:
                        stack.append(self.defs[n.id])
        return out

    # ------------------------------------------------------------ statements
    def body(self, stmts: tuple[A.Stmt, ...], weight: float, env: dict[str, int]) -> None:
        for s in stmts:
            self.stmt(s, weight, env)

    def stmt(self, s: A.Stmt, weight: float, env: dict[str, int]) -> None:
        if isinstance(s, A.For):
            self.loop(s, weight, env)
        elif isinstance(s, A.If):  # both arms counted in full: an upper bound for a divergent branch
            self.body(s.body, weight, env)
            self.body(s.orelse, weight, env)
        elif isinstance(s, (A.Assign, A.AugAssign)):
            if isinstance(s.target, A.Name) and isinstance(s, A.Assign) and s.target.id not in self.defs:
                self.defs[s.target.id] = s.value
            self.expr(s.value, weight, env)
            if isinstance(s.target, A.Subscript):
                self.subscript(s.target, weight, env, load=False)
            target, source = _buffer_of(s.target), _buffer_of(s.value)
            if target in self.registers and source in self.tensors:
                self.prefetched.add(target)  # a register array filled from global memory
            if self.loops and target in self.shared and source in self.prefetched:
                self.async_in_loop = True  # register prefetch: the loads are in flight during the compute
            if self.is_data(s.value) or (isinstance(s.target, A.Name) and s.target.id in self.data_names):
                if isinstance(s.target, A.Name):
                    self.data_names.add(s.target.id)
                self.counts["fma_flops"] += (self.flops(s.value) + isinstance(s, A.AugAssign)) * weight
        elif isinstance(s, A.ExprStmt):
            self.expr(s.expr, weight, env)

    def is_data(self, e: A.Expr) -> bool:
        """A float value (a literal, a load, a data builtin, a data scalar), not index arithmetic."""
        if isinstance(e, (A.Float, A.Subscript)):
            return True
        if isinstance(e, A.Name):
            return e.id in self.data_names
        if isinstance(e, A.Call):
            return e.func_name in _DATA_FN or any(self.is_data(a) for a in e.args)
        if isinstance(e, A.BinOp):
            return self.is_data(e.left) or self.is_data(e.right)
        if isinstance(e, A.UnaryOp):
            return self.is_data(e.operand)
        return False

    def flops(self, e: A.Expr) -> int:
        """Vector arithmetic of a data expression (a load's indices are not counted)."""
        if isinstance(e, A.BinOp):
            return (e.op in ("+", "-", "*", "/")) + self.flops(e.left) + self.flops(e.right)
        if isinstance(e, A.Call) and e.func_name != "local":
            return (e.func_name in _ONE_FLOP) + sum(self.flops(a) for a in e.args)
        if isinstance(e, A.UnaryOp):
            return self.flops(e.operand)
        return 0

    def trips(self, args: tuple[A.Expr, ...], env: dict[str, int]) -> tuple[int, int, float]:
        """(lo, step, trip count); a bound that depends on the block (causal block skipping)
        averages the trip count over the grid's blocks along the dimensions it reads."""
        try:
            vals = [self.value(a, env) for a in args]
        except _Unknown:
            return 0, 1, 1
        lo, hi, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) > 2 else 1) \
            if len(vals) >= 2 else (0, 1, 1)
        if step <= 0:
            return lo, step, 1
        dims = sorted({int(n.args[0].value) for a in args for n in walk_defs(a, self.defs)
                       if isinstance(n, A.Call) and n.func_name == "block_id" and n.args and isinstance(n.args[0], A.Int)})
        if not dims:
            return lo, step, max(0, -(-(hi - lo) // step))
        total, count = 0, 0
        for point in itertools.product(*(range(0, self.grid[d], max(1, self.grid[d] // 64)) if d < len(self.grid)
                                         else (0,) for d in dims)):
            e = {**env, **{f"block_id({d})": b for d, b in zip(dims, point)}}
            lo_b, hi_b = (self.value(args[0], e), self.value(args[1], e)) if len(args) > 1 else (0, self.value(args[0], e))
            total, count = total + max(0, -(-(hi_b - lo_b) // step)), count + 1
        return lo, step, total / count

    def loop(self, s: A.For, weight: float, env: dict[str, int]) -> None:
        args = s.iter.args if isinstance(s.iter, A.Call) else ()
        lo, step, trip = self.trips(tuple(args), env)
        self.loops.append((s.var, lo, step, max(1, round(trip))))
        before = self.async_in_loop
        self.body(s.body, weight * trip, {**env, s.var: lo})
        self.loops.pop()
        self.async_in_loop = before or self.async_in_loop

    def subscript(self, sub: A.Subscript, weight: float, env: dict[str, int], load: bool = True) -> None:
        name = sub.value.id if isinstance(sub.value, A.Name) else None
        for idx in sub.indices:
            self.expr(idx, weight, env)
        if load:
            weight = self.hoisted(sub, weight)
        if name in self.tensors:
            self.global_access(sub, weight, env)
        elif name in self.shared:
            self.shared_access(sub, weight, env)

    def expr(self, e: A.Expr, weight: float, env: dict[str, int]) -> None:
        if isinstance(e, A.Subscript):
            self.subscript(e, weight, env)
        elif isinstance(e, A.Call):
            name = e.func.id if isinstance(e.func, A.Name) else ""
            if name == "async_copy" and len(e.args) == 2:
                self.async_in_loop = self.async_in_loop or bool(self.loops)
            if name in _SFU:
                self.counts["sfu_ops"] += weight
            if name in INSTRUCTIONS:
                i = INSTRUCTIONS[name]
                self.counts["mma_flops"] += weight / i.group_size * 2 * i.m * i.n * i.k
            for a in e.args:
                self.expr(a, weight, env)
        elif isinstance(e, A.BinOp):
            self.expr(e.left, weight, env)
            self.expr(e.right, weight, env)
        elif isinstance(e, A.UnaryOp):
            self.expr(e.operand, weight, env)


def estimate(text: str, sizes: dict[str, int], device: str, compiled: bool = False, path: str = "<model>") -> Estimate:
    """The model's time for the file's (first) kernel at `sizes` on `device` (devices.toml).
    `compiled`: take registers and shared memory from the device's backend when it compiles the
    kernel here (else they are estimated from the text). `path` names the text in errors (the
    path a caller parsed it under, so the front end's parse memo answers)."""
    try:
        return _estimate(text, sizes, device, compiled, path)
    except _Unknown as exc:
        from .errors import PlannerError

        raise PlannerError(f"the model cannot evaluate the launch shape or a tensor's shape: {exc} has no value "
                           f"(give it with --sizes; given: {', '.join(f'{k}={v}' for k, v in sizes.items())})") \
            from None


def _estimate(text: str, sizes: dict[str, int], device: str, compiled: bool = False,
              path: str = "<model>") -> Estimate:
    dev = devices()[device]
    k = parse_text(text, path).kernels[0]
    kw = {x.name: x.value for x in k.decorator.kwargs}
    walk = _Walk(dict(sizes), {}, {}, dev["group"], (1,))
    grid = walk.grid = _dims(walk, kw.get("grid"))
    walk.block = _dims(walk, kw.get("block"))
    for p in k.params:
        ann = p.annotation
        if isinstance(ann, A.Subscript) and len(ann.indices) == 2 and isinstance(ann.indices[0], A.Name):
            shape = ann.indices[1].elts if isinstance(ann.indices[1], A.Tuple) else (ann.indices[1],)
            walk.tensors[p.name] = (ann.indices[0].id, tuple(shape))
    for s in k.body:  # launch-level names (a constant tile size) before the shared buffers use them
        if isinstance(s, A.Assign) and isinstance(s.target, A.Name) and s.target.id not in walk.defs:
            walk.defs[s.target.id] = s.value
    _collect_shared(walk, k.body)
    walk.registers = _registers(k.body)
    threads = math.prod(grid) * math.prod(walk.block)
    walk.body(k.body, float(threads), {})
    c = walk.counts
    footprint = sum(math.prod(walk.value(s, {}) for s in shape) * _ESIZE.get(dt, 4)
                    for dt, shape in walk.tensors.values())
    units, clock = dev["units"], dev["clock_ghz"] * 1e9
    terms = {
        "dram": footprint / (dev["hbm_tb_s"] * 1e12),
        "l2": c["global_sectors"] * 32 / (dev["l2_tb_s"] * 1e12),
        "issue": c["global_instr"] / (units * clock * dev["mem_instr_per_clk"]),
        "lds": c["lds_wavefronts"] * dev["lanes_per_phase"] * 4 / (units * clock * dev["lds_bytes_per_clk"]),
        "mma": c["mma_flops"] / (dev["matrix_tflops"] * 1e12),
        "fma": c["fma_flops"] / (dev["vector_tflops"] * 1e12),
        "sfu": c["sfu_ops"] / (units * clock * dev["sfu_per_clk"]),
    }
    blocks = math.prod(grid)
    occ = occupancy(kernel_resources(text, k, dev["target"] if compiled else None), math.prod(walk.block), dev,
                    grid_blocks=math.ceil(blocks / units))
    factor = latency_factor(occ, walk.async_in_loop, dev)
    busy = min(1.0, blocks / units)  # a grid smaller than the device leaves units idle
    for term in ("issue", "lds", "mma", "fma", "sfu"):
        terms[term] /= busy
    memory = max(terms["dram"], terms["l2"], terms["issue"]) * factor
    compute = terms["lds"] + terms["mma"] + terms["fma"] + terms["sfu"]
    seconds = max(memory, compute) if walk.async_in_loop else memory + compute
    return Estimate(seconds, terms, {**c, "threads": threads, "footprint_bytes": footprint}, walk.async_in_loop, device,
                    {**occ.to_json(), "latency_factor": factor})


def walk_defs(e: A.Expr, defs: dict[str, A.Expr]):
    """The nodes of `e` and of the definitions of the names it reads, transitively."""
    seen: set[str] = set()
    stack = [e]
    while stack:
        for n in walk(stack.pop()):
            yield n
            if isinstance(n, A.Name) and n.id in defs and n.id not in seen:
                seen.add(n.id)
                stack.append(defs[n.id])


def _layout(walk: _Walk, e: A.Expr):
    """`swizzle(b, m, s) @ row_major(r, c)` (or a bare `row_major`/`col_major`) as a callable
    layout; any other layout expression is raised as unknown (the walk then counts the access as
    conflict-free: a blind spot, docs/planner.md)."""
    from ave_decl.hw.layout import Composed, Swizzle, col_major, row_major

    def ints(c: A.Call) -> list[int]:
        return [walk.value(a, {}) for a in c.args]

    if isinstance(e, A.BinOp) and e.op == "@" and isinstance(e.left, A.Call) and isinstance(e.right, A.Call) \
            and isinstance(e.left.func, A.Name) and e.left.func.id == "swizzle":
        return Composed(Swizzle(*ints(e.left)), _layout(walk, e.right))
    if isinstance(e, A.Call) and isinstance(e.func, A.Name) and e.func.id in ("row_major", "col_major"):
        return (row_major if e.func.id == "row_major" else col_major)(*ints(e))
    raise _Unknown("layout")


def _dims(walk: _Walk, e: A.Expr | None) -> tuple[int, ...]:
    if e is None:
        return (1,)
    elts = e.elts if isinstance(e, A.Tuple) else (e,)
    return tuple(max(1, walk.value(x, {})) for x in elts)


def _buffer_of(e: A.Expr) -> str | None:
    """The buffer `e` indexes (`buf[i, j]`), if it is a subscript of a name."""
    return e.value.id if isinstance(e, A.Subscript) and isinstance(e.value, A.Name) else None


def _registers(stmts) -> set[str]:
    """The kernel's register arrays (`name = local(...)`)."""
    return {s.target.id for s in walk(stmts) if isinstance(s, A.Assign) and isinstance(s.target, A.Name)
            and isinstance(s.value, A.Call) and s.value.func_name == "local"}


def _collect_shared(w: _Walk, stmts) -> None:
    """Every `name = shared(dtype, shape[, layout=...])` of the kernel, at any depth."""
    for s in walk(stmts):
        if isinstance(s, A.Assign) and isinstance(s.target, A.Name) and isinstance(s.value, A.Call) \
                and s.value.func_name == "shared":
            args = s.value.args
            dtype = args[0].id if isinstance(args[0], A.Name) else "f32"
            shape = tuple(w.value(x, {}) for x in (args[-1].elts if isinstance(args[-1], A.Tuple) else (args[-1],)))
            w.shared[s.target.id] = (dtype, shape)
            layout = next((kw.value for kw in s.value.kwargs if kw.name == "layout"), None)
            if layout is not None:
                try:
                    w.layouts[s.target.id] = _layout(w, layout)
                except _Unknown:
                    pass
