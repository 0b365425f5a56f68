"""Lowering of statements: loops, branches, assignments, tags and assertions (mixed into KernelLowering)."""
from __future__ import annotations

from ..hw.dtypes import DTYPES
from ..hw.expr import BINARY_OPS, UNARY_OPS, ExprLimitError, symbols
from ..hw.instructions import INSTRUCTIONS, LoadMatrix
from ..lang import ast as A
from ..lang.depth import walk
from ..lang.printer import expr as expr_source
from ..lang.resolve import BUILTINS, SCHEDULING_HINTS, SLOT_REDUCTIONS, free_names
from .values import Binding, Buffer, BVal, Conditional, DVal, InstrVal, IVal, LayoutVal, LoopLocal, const_size, describe


def _new_data_scalars(before: dict, after: dict) -> dict:
    """Bindings of data scalars (implicit 0-d registers) that a branch introduced: the other branch
    must store into the same register, or the join would keep only one branch's value."""
    return {name: b for name, b in after.items() if name not in before and isinstance(b.value, Buffer)
            and b.value.implicit}


def relation_text(lam: A.Lambda) -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """What a failing `assert_tag` message names: the lambda's text and the tag components it
    compares, as (written name, side 0 = lhs / 1 = rhs, component index)."""
    comps = set()
    stack = [lam.body]
    while stack:
        n = stack.pop()
        if (isinstance(n, A.Subscript) and isinstance(n.value, A.Name) and n.value.id in lam.params
                and len(n.indices) == 1 and isinstance(n.indices[0], A.Int)):
            comps.add((f"{n.value.id}[{n.indices[0].value}]", lam.params.index(n.value.id), n.indices[0].value))
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, A.Lambda):
            stack.extend(getattr(n, f) for f in n.__dataclass_fields__ if f != "span")
        elif isinstance(n, tuple):
            stack.extend(n)
    return expr_source(lam.body), tuple(sorted(comps, key=lambda c: (c[1], c[2])))


MAX_WAIT_GROUPS = 7  # copy groups a thread may leave in flight (the rules count commits up to n + 1)


def _increment(s: A.Stmt) -> tuple[str | None, A.Expr]:
    """(x, e) for a statement `x = x + e`, `x = x - e`, `x += e` or `x -= e` (else (None, ...))."""
    if isinstance(s, A.AugAssign) and isinstance(s.target, A.Name) and s.op in "+-":
        return s.target.id, s.value
    if (isinstance(s, A.Assign) and isinstance(s.target, A.Name) and isinstance(s.value, A.BinOp)
            and s.value.op in "+-" and isinstance(s.value.left, A.Name) and s.value.left.id == s.target.id):
        return s.target.id, s.value.right
    return None, s  # type: ignore[return-value]


def symbol_words(names: set[str]) -> str:
    """The source names of expression symbols (for messages)."""
    words = []
    for n in sorted(names):
        kind, _, rest = n.partition(":")
        words.append({"tid": f"thread_id({rest})", "bid": f"block_id({rest})", "loop": "a loop variable",
                      "slot": "a register slot"}.get(kind, n))
    return ", ".join(dict.fromkeys(words))


class StatementLowering:
    """Lowering of statements: loops, branches, assignments, tags and assertions."""

    def block(self, body: tuple[A.Stmt, ...]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: A.Stmt) -> None:
        try:  # zero-cost; an expression bound exceeded outside any expression's eval (addresses, sizes)
            if isinstance(s, A.Pass):
                return
            if isinstance(s, A.For):
                return self._for(s)
            if isinstance(s, A.If):
                return self._if(s)
            if isinstance(s, A.ExprStmt):
                return self._expr_stmt(s)
            if isinstance(s, A.Assign):
                return self._assign(s.target, s.value, s)
            if isinstance(s, A.AugAssign):
                value = A.BinOp(s.op, s.target, s.value, s.span)
                return self._assign(s.target, value, s)
            raise self.err("unsupported statement", s)
        except ExprLimitError as exc:
            raise self.err(str(exc), s) from None

    def _for(self, s: A.For) -> None:
        it = s.iter
        if not (isinstance(it, A.Call) and it.func_name == "range" and not it.kwargs):
            raise self.err("a for loop must iterate over range(...)", it)
        self._arity(it, 1, 3)
        args = [self.index(a, "range bound") for a in it.args]
        lo, hi, step = (self.t.const(0), args[0], self.t.const(1)) if len(args) == 1 else (
            args[0], args[1], args[2] if len(args) == 3 else self.t.const(1))
        step_node = self.t.nodes[step]
        if step_node.op != "const" or step_node.value <= 0:
            raise self.err("range step must be a positive constant", it.args[2] if len(it.args) == 3 else it)
        header = self._node("for", s.span)
        var = self.t.sym(f"loop:{header}")
        self.loop_ranges[f"loop:{header}"] = (lo, hi)
        self.loop_stack.append(header)
        self.scope_stack.append(self._new_scope())
        saved = self.env.get(s.var)
        if s.var in BUILTINS or s.var in DTYPES or s.var in self.imports:
            raise self.err(f"'{s.var}' is a builtin name and cannot be a loop variable", s)
        if saved is not None and isinstance(saved.value, Buffer):
            raise self.err(f"loop variable '{s.var}' would hide the buffer of the same name", s)
        self.env[s.var] = Binding(IVal(var), self.scope_stack[-1])
        carried = self._induction_variables(s, var, lo, step)
        before = dict(self.env)
        self.block(s.body)
        self._end_loop_locals(s, header, before)
        after = self.t.op("max", self.t.const(0), self.t.op(
            "floordiv", self.t.op("add", self.t.op("sub", hi, lo), self.t.const(self.t.nodes[step].value - 1)), step))
        for name, (start, per_iteration, binding) in carried.items():  # its value once the loop has run
            self.env[name] = Binding(IVal(self.t.op("add", start, self.t.op("mul", per_iteration, after))),
                                     binding.scope)
        latch = self._node("latch", s.span)
        self.facts.add("back_edge", latch, header)
        self.facts.add("loop", header, latch, s.var, lo, hi, step)
        self.loop_stack.pop()
        self.scope_stack.pop()
        if saved is None:
            del self.env[s.var]
            self.ended_loops[s.var] = s.span
        else:
            self.env[s.var] = saved

    def _induction_variables(self, s: A.For, var: int, lo: int, step: int) -> dict[str, tuple[int, int, Binding]]:
        """Index names the loop body advances by a loop-invariant amount at its top level
        (`tile = tile + 1`, `k0 += 64`): in iteration k (from 0) such a name starts as its value
        before the loop plus k times the body's total increment, and the updates then apply in
        order. Bound here in the body's scope, so the updates are sequential reassignments; after
        the loop it holds start + increment * trip count. Returns name -> (start, increment, binding)."""
        assignments: dict[str, list[A.Stmt]] = {}
        for st in s.body:
            for n in walk(st, into_lambdas=False):
                if isinstance(n, (A.Assign, A.AugAssign)) and isinstance(n.target, A.Name):
                    assignments.setdefault(n.target.id, []).append(n)
                elif isinstance(n, A.For):
                    assignments.setdefault(n.var, []).append(n)
        assigned = set(assignments) | {s.var}
        steps: dict[str, list[int]] = {}
        for st in s.body:
            name, amount = _increment(st)
            if name is None:
                continue
            # every assignment of the name in the body must be such a top-level increment
            if any(_increment(a)[0] != name or not any(a is top for top in s.body) for a in assignments[name]):
                continue
            b = self.env.get(name)
            # bound right around this loop (an outer loop or branch would carry it too), advanced by
            # an index expression the body does not change
            if (b is None or not isinstance(b.value, IVal) or b.scope != self.scope_stack[-2]
                    or free_names(amount, set()) & assigned
                    or any(isinstance(n, (A.Subscript, A.Lambda)) for n in walk(amount))):
                continue
            inc = self.eval(amount)
            if not isinstance(inc, IVal):
                continue
            if isinstance(st, A.AugAssign) and st.op == "-" or isinstance(st, A.Assign) and st.value.op == "-":
                inc = IVal(self.t.op("neg", inc.eid))
            steps.setdefault(name, []).append(inc.eid)
        out = {}
        k = self.t.op("floordiv", self.t.op("sub", var, lo), step)  # the iteration number
        for name, incs in steps.items():
            total = incs[0]
            for x in incs[1:]:
                total = self.t.op("add", total, x)
            outer = self.env[name]
            out[name] = (outer.value.eid, total, outer)  # type: ignore[union-attr]
            self.env[name] = Binding(IVal(self.t.op("add", outer.value.eid, self.t.op("mul", total, k))),  # type: ignore[union-attr]
                                     self.scope_stack[-1])
        return out

    def _end_loop_locals(self, s: A.For, header: int, before: dict[str, Binding]) -> None:
        """Index names bound in the loop body from its variable have no value after the loop: they
        become LoopLocal (an error at a later use) instead of leaking `loop:<header>` into
        expressions that no loop iteration names (a KeyError in the Z3 encoding)."""
        var = f"loop:{header}"
        for name, b in list(self.env.items()):
            if name == s.var or before.get(name) is b:
                continue
            eid = b.value.base if isinstance(b.value, Buffer) else b.value.eid if isinstance(b.value, (IVal, BVal)) \
                else None  # a subview at an offset that varies with the loop has no storage after it
            if eid is not None and var in symbols(self.t, eid):
                what = "subview" if isinstance(b.value, Buffer) else "index name"
                self.env[name] = Binding(LoopLocal(name, s.var, s.span, what), b.scope)

    def _new_scope(self) -> int:
        self.next_scope += 1
        return self.next_scope

    def _if(self, s: A.If) -> None:
        node = self._node("if", s.span)
        cond = self.cond(s.cond)
        self.facts.add("branch", node, cond if cond is not None else -1)
        before = dict(self.env)
        results = []
        for pol, body in ((1, s.body), (0, s.orelse)):
            self.env = dict(before)
            if pol == 0:  # a data scalar the then-branch declared is the same variable in the else-branch
                self.env.update(_new_data_scalars(before, results[0][0]))
            self.preds = [node]
            if cond is not None:
                self.guards.append((cond, pol))
            else:
                self.data_guarded += 1
            self.scope_stack.append(self._new_scope())
            self.branches.append((node, pol))
            self.block(body)
            self.branches.pop()
            self.scope_stack.pop()
            if cond is not None:
                self.guards.pop()
            else:
                self.data_guarded -= 1
            results.append((dict(self.env), list(self.preds)))
        (env_then, preds_then), (env_else, preds_else) = results
        merged = dict(before)
        for name in set(env_then) | set(env_else):
            a, b = env_then.get(name), env_else.get(name)
            if a is not None and b is not None and a.value is b.value:
                merged[name] = a
            elif any(x is not None and isinstance(x.value, (IVal, BVal, LayoutVal)) for x in (a, b)):
                merged[name] = Binding(Conditional(name, s.span), self.scope_stack[-1])
            else:
                merged[name] = a or b  # type: ignore[assignment]
        self.env = merged
        self.preds = preds_then + preds_else
        self._node("join", s.span)

    def _expr_stmt(self, s: A.ExprStmt) -> None:
        e = s.expr
        if not isinstance(e, A.Call) or not isinstance(e.func, A.Name):
            raise self.err("an expression statement must be a call such as syncthreads() or assume(...)", e)
        name = e.func.id
        f = self.lookup(e.func)
        if isinstance(f, InstrVal):
            raise self.err(f"the result of {name} must be assigned to a register array", e)
        if name == "syncthreads":
            self._arity(e, 0, 0)
            sid = self._node("barrier", s.span)
            self.facts.add("barrier", sid)
        elif name == "async_wait":
            self._arity(e, 0, 1)
            sid = self._node("async_wait", s.span)
            if e.args:  # wait_group n: all but the n most recent committed groups have landed
                n = self.const_int(e.args[0], "the number of copy groups async_wait(n) leaves in flight")
                if not 0 <= n <= MAX_WAIT_GROUPS:
                    raise self.err(f"async_wait(n) needs 0 <= n <= {MAX_WAIT_GROUPS} (PTX cp.async.wait_group)",
                                   e.args[0])
                self.facts.add("async_wait_group", sid, n)
            else:
                self.facts.add("async_wait", sid)
        elif name in SCHEDULING_HINTS:  # checked, then ignored: they only order instructions
            params = SCHEDULING_HINTS[name]
            self._arity(e, len(params), len(params))
            for arg, (what, top) in zip(e.args, params):
                n = self.const_int(arg, f"the {what} of {name}()")
                if not 0 <= n <= top:
                    raise self.err(f"the {what} of {name}() must lie in [0, {top}]", arg)
        elif name == "async_commit":
            self._arity(e, 0, 0)
            sid = self._node("async_commit", s.span)
            self.facts.add("async_commit", sid)
        elif name == "async_copy":
            self._async_copy(e, s)
        elif name == "assume":
            if not e.args:
                raise self.err("assume() needs at least one condition", e)
            self._node("assume", s.span)
            for a in e.args:
                v = self.eval(a)
                if not isinstance(v, (BVal, IVal)):
                    raise self.err("assume() takes conditions over sizes and indices", a)
                other = {n for n in symbols(self.t, v.eid) if not n.startswith(("size:", "uf:"))}
                if other:  # an assumption holds for the whole kernel (every query): sizes only
                    raise self.err(f"assume() constrains sizes only; this condition depends on "
                                   f"{symbol_words(other)}", a)
                self.facts.add("assumption", v.eid)
        elif name == "tag":
            self._tag(e, s)
        elif name in ("assert_tag_eq", "assert_tag"):
            self._assert(e, s)
        elif name == "assert_mask":
            self._assert_mask(e, s)
        elif name == "reset_tags":
            self._arity(e, 1, 1)
            buf = self._buffer_arg(e.args[0], "reset_tags")
            if buf.space == "global":
                raise self.err("reset_tags() applies to shared or local buffers", e.args[0])
            sid = self._node("reset", s.span)
            self.facts.add("reset_tags", sid, buf.id)
            # every element now holds "no tag" (Bottom): a whole-buffer write of an untagged value,
            # which also ends the provenance of everything stored before
            aid = self._access(buf, "write_all", (), self.t.sym("slot"))
            self.facts.add("store_value", aid, self._value("const"))
        elif name in BUILTINS:
            raise self.err(f"{name}(...) computes a value; assign it to a name", e)
        else:
            raise self.err(f"undefined name '{name}'", e.func)

    def _tag(self, e: A.Call, s: A.Stmt) -> None:
        if len(e.args) < 3:
            raise self.err("tag(x, lambda i, j, ...: (...), \"Name\", captures...) needs at least 3 arguments", e)
        buf = self._buffer_arg(e.args[0], "tag")
        lam, name = e.args[1], e.args[2]
        if not isinstance(lam, A.Lambda):
            raise self.err("the second argument of tag() must be a lambda over the tensor's coordinates", lam)
        if not isinstance(name, A.Str):
            raise self.err("the third argument of tag() must be the tag's name as a string", name)
        if len(lam.params) != buf.rank:
            raise self.err(f"the tag lambda takes {len(lam.params)} coordinate(s) but '{buf.name}' has rank "
                           f"{buf.rank}", lam)
        if buf.tagged:
            raise self.err(f"'{buf.name}' already has a tag binding (one binding per tensor)", e)
        if buf.base is not None and buf.stored:
            raise self.err(f"tag the moving subview '{buf.name}' before its first store: the tag is a claim about "
                           f"every value stored into it in each iteration", e)
        if buf.has_views:
            raise self.err(f"'{buf.name}' has subviews: tag the subviews instead of the storage they share", e)
        free = free_names(lam.body, set(lam.params))
        for cap in e.args[3:]:
            if not isinstance(cap, A.Name):
                raise self.err("tag captures must be plain names", cap)
            if cap.id not in free:
                raise self.err(f"capture '{cap.id}' is not used in the tag lambda", cap)
        sid = self._node("tag", s.span)
        saved = dict(self.env)
        for i, p in enumerate(lam.params):
            self.env[p] = Binding(IVal(self.t.sym(f"arg:{i}")), self.scope_stack[-1])
        body = lam.body.elts if isinstance(lam.body, A.Tuple) else (lam.body,)
        comps = [self.index(c, "tag component") for c in body]
        loops: set[int] = set()
        for c, node in zip(comps, body):
            used = {n for n in symbols(self.t, c) if n.startswith("loop:")}
            if used and buf.space != "local" and not self._moves_with(buf, used):
                raise self.err("a tag binding of a tensor or shared buffer holds for the whole kernel, so its "
                               "components cannot depend on a loop variable (a register array's tag can, and a "
                               "subview's on the loop variables its offset moves with)", node)
            loops |= {int(n.split(":", 1)[1]) for n in used}
        self.env = saved
        if buf.space == "local" and buf.stored:
            raise self.err(f"tag register array '{buf.name}' before its first store: the tag is a claim about "
                           f"every value stored into it", e)
        buf.tagged = True
        buf.tag_loops = frozenset(loops)
        self.facts.add("tag_bind", buf.id, name.value, len(comps), sid)
        for i, c in enumerate(comps):
            self.facts.add("tag_comp", buf.id, i, c)

    def _moves_with(self, buf: Buffer, loops: set[str]) -> bool:
        """Whether `buf` is a subview whose offset moves with every loop in `loops`: it is declared
        anew in each of their iterations (and used only there), so its tag may name them."""
        return buf.base is not None and loops <= symbols(self.t, buf.base)

    def _operand(self, e: A.Expr, what: str) -> tuple[DVal, Buffer | None]:
        """A data value, or a whole local buffer read slot by slot."""
        if isinstance(e, A.Name):
            v = self.lookup(e)
            if isinstance(v, Buffer) and not v.implicit:
                if v.space != "local":
                    raise self.err(f"{what}: a whole {v.space} tensor cannot be an operand; index it", e)
                return self._read_all(v), v
        v = self.eval(e)
        if not isinstance(v, DVal):
            raise self.err(f"{what} must be a data value or a register array, not {describe(v)}", e)
        return v, None

    def _read_all(self, buf: Buffer) -> DVal:
        slot = self.t.sym("slot")
        coords, rest = [], slot
        for i, d in enumerate(reversed(buf.const_shape or ())):
            last = i == len(buf.shape) - 1
            coords.append(rest if last else self.t.op("mod", rest, self.t.const(d)))
            if not last:
                rest = self.t.op("floordiv", rest, self.t.const(d))
        aid = self._access(buf, "read_all", tuple(reversed(coords)), slot)
        vid = self._value("load")
        self.facts.add("value_load", vid, aid)
        return DVal(vid, buf.dtype)

    def _assert(self, e: A.Call, s: A.Stmt) -> None:
        rel = e.func_name == "assert_tag"
        self._arity(e, 3 if rel else 2, 3 if rel else 2)
        sid = self._node("assert", s.span)
        (lv, lb), (rv, rb) = self._operand(e.args[0], "assertion operand"), self._operand(e.args[1], "assertion operand")
        if (lb is None) != (rb is None) or (lb and rb and const_size(lb) != const_size(rb)):
            raise self.err("both sides of a tag assertion must be single values, or register arrays of equal size", e)
        if not rel:
            self.facts.add("assert_eq", sid, lv.vid, rv.vid)
            return
        lam = e.args[2]
        if not isinstance(lam, A.Lambda) or len(lam.params) != 2:
            raise self.err("assert_tag(x, y, lambda tx, ty: ...) needs a two-parameter lambda", lam)
        saved = dict(self.env)
        self._tag_params = {lam.params[0]: "lhs", lam.params[1]: "rhs"}
        for p in lam.params:
            self.env.pop(p, None)
        body = self._relation(lam.body)
        self.env = saved
        self.facts.add("assert_rel", sid, lv.vid, rv.vid, body)
        self.facts.relation_texts[sid] = relation_text(lam)

    def _assert_mask(self, e: A.Call, s: A.Stmt) -> None:
        """`assert_mask(x, lambda t: ...)`: wherever x holds a tagged element that came through the
        tagged branch of every select on its way (it was not masked off), the predicate holds."""
        self._arity(e, 2, 2)
        sid = self._node("assert", s.span)
        v, _buf = self._operand(e.args[0], "assert_mask operand")
        lam = e.args[1]
        if not isinstance(lam, A.Lambda) or len(lam.params) != 1:
            raise self.err("assert_mask(x, lambda t: ...) needs a one-parameter lambda", lam)
        saved = dict(self.env)
        self._tag_params = {lam.params[0]: "lhs"}
        self.env.pop(lam.params[0], None)
        body = self._relation(lam.body)
        self.env = saved
        self.facts.add("assert_mask", sid, v.vid, body)

    def _relation(self, e: A.Expr) -> int:
        """The body of an assert_tag lambda: tx[i] / ty[i] become lhs:i / rhs:i symbols."""
        if isinstance(e, A.Subscript) and isinstance(e.value, A.Name) and e.value.id in self._tag_params:
            if len(e.indices) != 1:
                raise self.err("a tag component takes one index", e)
            i = self.const_int(e.indices[0], "tag component index")
            return self.t.sym(f"{self._tag_params[e.value.id]}:{i}")
        if isinstance(e, A.Name) and e.id in self._tag_params:
            raise self.err(f"use a component of the tag, e.g. {e.id}[0]", e)
        if isinstance(e, A.BinOp):
            op = BINARY_OPS.get(e.op)
            if op is None:
                raise self.err(f"operator {e.op} is not allowed in a tag relation", e)
            return self.t.op(op, self._relation(e.left), self._relation(e.right))
        if isinstance(e, A.BoolOp):
            out = self._relation(e.values[0])
            for v in e.values[1:]:
                out = self.t.op(BINARY_OPS[e.op], out, self._relation(v))
            return out
        if isinstance(e, A.UnaryOp):
            return self.t.op(UNARY_OPS[e.op], self._relation(e.operand)) if e.op != "+" else self._relation(e.operand)
        return self.index(e, "tag relation term")

    # ------------------------------------------------------------ assignment
    def _assign(self, target: A.Expr, value: A.Expr, s: A.Stmt) -> None:
        if isinstance(target, A.Subscript):
            if not isinstance(target.value, A.Name):
                raise self.err("assignment target must be a name or name[indices]", target)
            buf = self.lookup(target.value)
            if not isinstance(buf, Buffer) or buf.implicit:
                raise self.err(f"'{target.value.id}' is not a tensor or buffer", target.value)
            self._node("store", s.span)
            v = self.eval(value)
            if isinstance(v, (IVal, BVal)):
                v = DVal(self._index_value(v.eid), buf.dtype)
            if not isinstance(v, DVal):
                raise self.err(f"cannot store {describe(v)} into '{buf.name}'", value)
            coords = self._coords(buf, target.indices, target)
            aid = self._access(buf, "store", coords, self._address(buf, coords))
            self.vector_access(aid, target)
            self.facts.add("store_value", aid, v.vid)
            return
        if not isinstance(target, A.Name):
            raise self.err("assignment target must be a name or name[indices]", target)
        name = target.id
        if isinstance(value, A.Call) and isinstance(value.func, A.Name):
            fname = value.func.id
            if fname in ("shared", "local") and fname not in self.env:
                return self._alloc(name, value, s)
            if fname == "subview" and fname not in self.env:
                return self._subview(name, value, s)
            f = self.env.get(fname)
            if f is None and fname in self.imports and isinstance(self.imports[fname], LoadMatrix):
                return self._ldmatrix(name, value, s)
            if f is None and fname in self.imports:
                return self._mma(name, value, s)
            if f is None and fname in INSTRUCTIONS:
                self.lookup(value.func)  # raises: not imported
            if f is None and fname in SLOT_REDUCTIONS and value.args and isinstance(value.args[0], A.Name):
                arr = self.env.get(value.args[0].id)
                if arr is not None and isinstance(arr.value, Buffer) and arr.value.space == "local" and \
                        arr.value.rank >= 2:  # reduce_max(s, axis=a) of a 2-D array: an array
                    return self._axis_reduce(name, value, s)
        existing = self.env.get(name)
        if existing is not None and isinstance(existing.value, Buffer) and not existing.value.implicit:
            raise self.err(f"'{name}' is a tensor/buffer; assign to its elements with {name}[...] = ...", target)
        self._node("assign", s.span)
        v = self.eval(value)
        if isinstance(v, DVal):
            buf = existing.value if existing is not None and isinstance(existing.value, Buffer) else None
            if buf is None:
                buf = Buffer(name, name, "local", v.dtype, (), (), None, s.span, implicit=True)
                self._declare(buf)
                self.bind(name, buf, target)
            aid = self._access(buf, "store", (), self.t.const(0))
            self.facts.add("store_value", aid, v.vid)
            return
        if isinstance(v, (IVal, BVal, LayoutVal)):
            if existing is not None and isinstance(existing.value, Buffer):
                raise self.err(f"'{name}' holds data; it cannot become an index or layout", target)
            self.bind(name, v, target)
            return
        raise self.err(f"cannot assign {describe(v)} to a name", value)
