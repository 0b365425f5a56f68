"""Mutation operators: small, realistic kernel bugs, for the mutation benchmark (bench/mutants.py)
and for users measuring their own invariants.

Each operator takes a kernel's source text and returns the mutants it can make (one per site, in
source order), each a `Mutant(operator, line, description, text)`; an operator that does not apply
returns []. They edit text, not the AST, so a mutant keeps the original's line numbers (a dropped
line becomes `pass`) and reads like the bug a person or an agent would write.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Mutant:
    operator: str
    line: int
    description: str
    text: str


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _shared_names(text: str) -> set[str]:
    return set(re.findall(r"^\s*(\w+)\s*=\s*shared\(", text, re.M))


def _replace_line(text: str, i: int, new: str) -> str:
    lines = _lines(text)
    lines[i] = new
    return "\n".join(lines)


def _sub_each(text: str, op: str, line_pattern: str, edit: Callable[[re.Match, str], str | None],
              what: str) -> list[Mutant]:
    out = []
    for i, line in enumerate(_lines(text)):
        m = re.search(line_pattern, line)
        if m is None or line.lstrip().startswith("#"):  # comments are not code
            continue
        new = edit(m, line)
        if new is not None and new != line:
            out.append(Mutant(op, i + 1, what, _replace_line(text, i, new)))
    return out


def _shared_read(text: str) -> str:
    names = "|".join(sorted(_shared_names(text))) or "$^"
    return rf"^\s*\w+\[[^\]]*\]\s*=\s*(?:{names})\[(.*)\]\s*$"


def transpose_shared_read(text: str) -> list[Mutant]:
    """Swap the last two indices of a shared-memory read (a transposed fragment load)."""
    def edit(m, line):
        parts = _split_top(m.group(1))
        if len(parts) < 2:
            return None
        parts[-1], parts[-2] = parts[-2], parts[-1]
        return line[:m.start(1)] + ", ".join(parts) + line[m.end(1):]
    return _sub_each(text, "transpose_shared_read", _shared_read(text), edit, "transposed shared-memory read")


def swap_lane_value(text: str) -> list[Mutant]:
    """In an operand read, exchange the roles of the lane group and the value slot in the K index."""
    pat = r"(?:\((lane // \d+)\) \* (\d+)|(\d+) \* \((lane // \d+)\)) \+ v\b"

    def edit(m, line):
        lane, factor = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        return line[:m.start()] + f"v * {factor} + {lane}" + line[m.end():] if factor != "1" else None
    return _sub_each(text, "swap_lane_value", pat, edit, "lane and value roles swapped in the K index")


def off_by_one_stage(text: str) -> list[Mutant]:
    """Read the other stage of a multi-stage buffer (the one being refilled)."""
    names = "|".join(sorted(_shared_names(text))) or "$^"
    pat = rf"=\s*(?:{names})\[(st), "

    def edit(m, line):
        return re.sub(rf"((?:{names})\[)st, ", r"\g<1>1 - st, ", line)
    return _sub_each(text, "off_by_one_stage", pat, edit, "reads the stage being refilled")


def wrong_prologue_stage(text: str) -> list[Mutant]:
    """A pipeline's prologue fills stage 1 where the first iteration reads stage 0 (a write into
    stage 0 of a staged shared buffer: a store, an async copy or a vector store)."""
    names = "|".join(sorted(_shared_names(text))) or "$^"
    pat = rf"^\s*(?:(?:async_copy|store_vec)\(\s*)?(?:{names})\[0, "

    def edit(m, line):
        if not m.group(0).lstrip().startswith(("async_copy", "store_vec")) and not re.search(r"\]\s*=[^=]", line):
            return None  # a read of stage 0, not a write
        return line[:m.end() - 3] + "1, " + line[m.end():]
    return _sub_each(text, "wrong_prologue_stage", pat, edit, "the prologue fills the wrong stage")


def refill_read_stage(text: str) -> list[Mutant]:
    """A pipeline refills the stage it is reading: `1 - st` (or `1 - page`) becomes `st` in a write
    (a store, an async copy, a vector store, a helper's page argument), not in a read."""
    def edit(m, line):
        eq = re.search(r"[^=!<>]=[^=]", line)
        if eq is not None and m.start() > eq.start():
            return None  # on the right of an assignment: a read
        return line[:m.start()] + m.group(1) + line[m.end():]
    return _sub_each(text, "refill_read_stage", r"\b1 - (st|page|stage)\b", edit, "refills the stage being read")


def _drop(text: str, op: str, pattern: str, what: str) -> list[Mutant]:
    out = []
    for i, line in enumerate(_lines(text)):
        if re.fullmatch(pattern, line.strip()):
            indent = line[:len(line) - len(line.lstrip())]
            out.append(Mutant(op, i + 1, what, _replace_line(text, i, indent + "pass")))
    return out


def drop_barrier(text: str) -> list[Mutant]:
    return _drop(text, "drop_barrier", r"syncthreads\(\)", "barrier removed")


def barrier_one_arm(text: str) -> list[Mutant]:
    """Drop a barrier of an `else` arm, keeping the other arm's: the waves of a wave-specialized
    `if` then reach different numbers of barriers (a hang on a GPU)."""
    out, headers = [], []  # headers: (indent, is an else) of the blocks around the current line
    for i, line in enumerate(_lines(text)):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        while headers and headers[-1][0] >= indent:
            headers.pop()
        if body == "syncthreads()" and any(is_else for _, is_else in headers):
            out.append(Mutant("barrier_one_arm", i + 1, "barrier removed from one arm of a wave-specialized if",
                              _replace_line(text, i, line[:indent] + "pass")))
        if body.endswith(":"):
            headers.append((indent, body == "else:"))
    return out


def wrong_shuffle_mask(text: str) -> list[Mutant]:
    """Exchange with the wrong butterfly partner: the mask of a `shuffle_xor` doubled (halved when
    doubling would leave the warp/wave), as when a butterfly's steps are mixed up."""
    def edit(m, line):
        mask = int(m.group(2))
        new = mask * 2 if 0 < mask * 2 < 32 else max(mask // 2, 1) if mask > 1 else 2
        return line[:m.start(2)] + str(new) + line[m.end(2):]
    return _sub_each(text, "wrong_shuffle_mask", r"(shuffle_xor\([^,]+,\s*)(\d+)", edit, "wrong shuffle_xor mask")


def wrong_perm_selector(text: str) -> list[Mutant]:
    """A byte permute that interleaves the wrong halves: the selector of `perm` (v_perm_b32,
    bytes) or `prmt` (prmt.b32, nibbles) with its two 16-bit halves swapped (or, where they are
    alike, each half taken from the other operand), as when packed data is transposed wrongly."""
    def edit(m, line):
        sel, nib = int(m.group(3), 0), m.group(1) == "prmt"
        half, unit = (8, 0x8) if nib else (16, 0x80)
        swapped = ((sel & ((1 << half) - 1)) << half) | (sel >> half)
        if swapped == sel:  # alike halves: the same bytes of the other operand
            step = 4 if nib else 8
            swapped = sum((((sel >> i) & (unit * 2 - 1)) ^ (4 if ((sel >> i) & (unit * 2 - 1)) < 8 else 0)) << i
                          for i in range(0, 2 * half, step))
        return line[:m.start(3)] + f"0x{swapped:0{half // 2}x}" + line[m.end(3):]
    return _sub_each(text, "wrong_perm_selector", r"\b(perm|prmt)\(([^()]*,){2}\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)",
                     edit, "wrong byte-permute selector")


def wrong_buffer_offset(text: str) -> list[Mutant]:
    """A buffer load or store one 4-byte word off (`raw_buffer_load(r, off)` -> `off + 4`): the
    wrong element, or a read past the range that silently returns 0."""
    def edit(m, line):
        close = _close(line, m.end())
        args = _split_top(line[m.end():close])
        if len(args) < 2:
            return None
        start = line.index(args[1], m.end() + len(args[0]))
        return line[:start] + f"{args[1]} + 4" + line[start + len(args[1]):]
    return _sub_each(text, "wrong_buffer_offset", r"raw_buffer_(?:load|store)\(", edit, "buffer offset off by a word")


def drop_async_wait(text: str) -> list[Mutant]:
    return _drop(text, "drop_async_wait", r"async_wait\(\)", "async_wait() removed")


def swizzle_write_only(text: str) -> list[Mutant]:
    """Swizzle the column of shared-memory stores but not of the loads."""
    names = "|".join(sorted(_shared_names(text))) or "$^"
    pat = rf"^\s*(?:{names})\[(.*)\]\s*=|async_copy\((?:{names})\[(.*?)\], "

    def edit(m, line):
        g = 1 if m.group(1) is not None else 2
        parts = _split_top(m.group(g))
        if len(parts) < 2:
            return None
        parts[-1] = f"({parts[-1]}) ^ (({parts[-2]}) % 8)"
        return line[:m.start(g)] + ", ".join(parts) + line[m.end(g):]
    return _sub_each(text, "swizzle_write_only", pat, edit, "XOR swizzle on the store side only")


def wrong_k_offset(text: str) -> list[Mutant]:
    """Shift the K index of an operand read by one."""
    def edit(m, line):
        return line.replace("ks + ", "ks + 1 + ", 1) if "ks + " in line else None
    return _sub_each(text, "wrong_k_offset", _shared_read(text), edit, "K index of an operand read off by one")


def wrong_accumulator_output(text: str) -> list[Mutant]:
    """Store accumulator slot r ^ 1 where slot r belongs (a wrong C-operand layout in the epilogue)."""
    return _sub_each(text, "wrong_accumulator_output", r"\] = (\w+)\[r\]\s*$",
                     lambda m, line: line[:m.start(1)] + f"{m.group(1)}[r ^ 1]" + line[m.end(1) + 3:],
                     "epilogue stores the neighbouring accumulator slot")


def drop_block_offset(text: str) -> list[Mutant]:
    """Forget the block's row offset in the epilogue (every block writes the first tile)."""
    return _sub_each(text, "drop_block_offset", r"^\s*C\[bm \+ ",
                     lambda m, line: line.replace("C[bm + ", "C[", 1), "epilogue without the block offset")


def drop_bounds_mask(text: str) -> list[Mutant]:
    """Remove an `if` that masks accesses (its body runs unconditionally)."""
    out = []
    lines = _lines(text)
    for i, line in enumerate(lines):
        m = re.fullmatch(r"(\s*)if .*<.*:\s*", line)
        if m:
            out.append(Mutant("drop_bounds_mask", i + 1, "bounds mask removed",
                              _replace_line(text, i, m.group(1) + "if True:")))
    return out


_MASK = r"mask=(.+?)(?=, other=|\)\s*$)"


def drop_mask(text: str) -> list[Mutant]:
    """Remove the mask of a predicated load or store (and a load's default): it runs everywhere."""
    def edit(m, line):
        start = line.rfind(", ", 0, m.start())
        end = m.end()
        if line[end:].startswith(", other="):
            end = line.index(")", end) if line.count("(", end) == 0 else _close(line, end)
        return line[:start] + line[end:]
    return _sub_each(text, "drop_mask", _MASK, edit, "mask of a predicated access removed")


def _close(line: str, start: int) -> int:
    """The index of the `)` that closes the call whose arguments continue at `start`."""
    depth = 0
    for i in range(start, len(line)):
        if line[i] == "(":
            depth += 1
        elif line[i] == ")":
            if depth == 0:
                return i
            depth -= 1
    return len(line)


def _conditions(line: str) -> list[tuple[int, int]]:
    """(start, end) of the mask-like conditions on a line: a predicated access's `mask=`, an
    `if`'s condition, a `select`'s first argument."""
    out = []
    m = re.search(_MASK, line)
    if m:
        out.append((m.start(1), m.end(1)))
    m = re.fullmatch(r"\s*(?:el)?if (.+):\s*", line)
    if m and " for " not in line:
        out.append((m.start(1), m.end(1)))
    m = re.search(r"\bselect\(", line)
    if m:
        args = _split_top(line[m.end():_close(line, m.end())])
        if len(args) == 3:
            out.append((m.end(), m.end() + len(args[0])))
    return out


def _comparison(cond: str) -> tuple[re.Match, int] | None:
    """The first `<` / `<=` of a condition and where its right operand ends (at ` and `/` or `)."""
    lt = re.search(r"(?<![<>=!])<=?(?![<=])", cond)
    if lt is None:
        return None
    rest = re.search(r" and | or |$", cond[lt.end():])
    return lt, lt.end() + (rest.start() if rest else len(cond) - lt.end())


def _shift_condition(text: str, op: str, widen: bool, what: str) -> list[Mutant]:
    def edit(_m, line):
        for start, end in _conditions(line):
            found = _comparison(line[start:end])
            if found is None:
                continue
            lt, rhs_end = found
            at, stop = start + lt.start(), start + rhs_end
            strict = lt.group() == "<"
            if widen:  # a < b -> a <= b;  a <= b -> a <= b + 1
                return line[:at] + "<=" + line[at + 1:] if strict else line[:stop].rstrip() + " + 1" + line[stop:]
            # a < b -> a < b - 1;  a <= b -> a < b
            return line[:stop].rstrip() + " - 1" + line[stop:] if strict else line[:at] + "<" + line[at + 2:]
        return None
    return _sub_each(text, op, r"mask=|\bif |\bselect\(", edit, what)


def widen_mask(text: str) -> list[Mutant]:
    """A mask, guard or select condition that admits one element too many (`<` -> `<=`, `<= b` ->
    `<= b + 1`): a tail load out of bounds, a causal mask that leaks the next key."""
    return _shift_condition(text, "widen_mask", True, "mask admits one element too many")


def narrow_mask(text: str) -> list[Mutant]:
    """A mask, guard or select condition that drops its last element (`< b` -> `< b - 1`, `<=` ->
    `<`): an output row never written, the diagonal masked off."""
    return _shift_condition(text, "narrow_mask", False, "mask drops its last element")


def wait_group_count(text: str) -> list[Mutant]:
    """Wait for one copy group too few: `async_wait(n)` becomes `async_wait(n + 1)`."""
    return _sub_each(text, "wait_group_count", r"async_wait\((\d+)\)",
                     lambda m, line: line[:m.start(1)] + str(int(m.group(1)) + 1) + line[m.end(1):],
                     "async_wait(n) leaves one more copy group in flight")


def wrong_kv_head(text: str) -> list[Mutant]:
    """Map query head h to KV head h % G instead of h // G (grouped-query attention)."""
    return _sub_each(text, "wrong_kv_head", r"^\s*\w+ = h // (\d+)\s*$",
                     lambda m, line: line.replace(f"h // {m.group(1)}", f"h % {m.group(1)}"),
                     "query head -> KV head mapping h % G")


def wrong_statistic_row(text: str) -> list[Mutant]:
    """Use the statistic of the neighbouring register slot (another row) in a rescale."""
    return _sub_each(text, "wrong_statistic_row", r"exp2\((\w+)\[r\] - ",
                     lambda m, line: line.replace(f"exp2({m.group(1)}[r] - ", f"exp2({m.group(1)}[r ^ 1] - ", 1),
                     "rescale with another row's statistic")


def wrong_reduction_width(text: str) -> list[Mutant]:
    """Reduce over twice as many lanes as one row occupies."""
    return _sub_each(text, "wrong_reduction_width", r"lane_(?:sum|max)\((.*), (\d+)\)",
                     lambda m, line: line[:m.start(2)] + str(2 * int(m.group(2))) + line[m.end(2):],
                     "lane reduction wider than a row")


def wrong_expert_index(text: str) -> list[Mutant]:
    """Gather the weights of the next block's expert: an index read from a routing table
    (`e = expert_ids[pid]`) is replaced, at its first use as a tensor index, by the read one
    position further."""
    tables = {m.group(1): m.group(2) for m in re.finditer(
        r"(\w+): Tensor\[\w+, \((\w+),?\), \(", text)}
    out = []
    lines = _lines(text)
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\s*(\w+) = (\w+)\[(.+)\]\s*", line)
        if m is None or m.group(2) not in tables:
            continue
        name, table, idx = m.groups()
        for j in range(i + 1, len(lines)):
            if f"[{name}, " in lines[j]:
                new = lines[j].replace(f"[{name}, ", f"[{table}[({idx} + 1) % {tables[table]}], ", 1)
                out.append(Mutant("wrong_expert_index", j + 1, "gathers another block's expert",
                                  _replace_line(text, j, new)))
                break
    return out


def ldmatrix_matrix_order(text: str) -> list[Mutant]:
    """Swap the lane bits that pick an ldmatrix.x4 row's matrix (rows + 8 vs columns + 8)."""
    def edit(m, line):
        a, b = "(lane // 8) % 2", "lane // 16"
        return line.replace(a, "@@").replace(b, a).replace("@@", b) if a in line and b in line else None
    return _sub_each(text, "ldmatrix_matrix_order", r"ldmatrix_x4\(", edit, "ldmatrix matrices in the wrong order")


def _split_top(s: str) -> list[str]:
    """Split an index list at top-level commas."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


OPERATORS: dict[str, Callable[[str], list[Mutant]]] = {
    "transpose_shared_read": transpose_shared_read,
    "swap_lane_value": swap_lane_value,
    "off_by_one_stage": off_by_one_stage,
    "wrong_prologue_stage": wrong_prologue_stage,
    "refill_read_stage": refill_read_stage,
    "drop_barrier": drop_barrier,
    "barrier_one_arm": barrier_one_arm,
    "wrong_shuffle_mask": wrong_shuffle_mask,
    "wrong_buffer_offset": wrong_buffer_offset,
    "wrong_perm_selector": wrong_perm_selector,
    "drop_async_wait": drop_async_wait,
    "swizzle_write_only": swizzle_write_only,
    "wrong_k_offset": wrong_k_offset,
    "wrong_accumulator_output": wrong_accumulator_output,
    "drop_block_offset": drop_block_offset,
    "drop_bounds_mask": drop_bounds_mask,
    "wrong_kv_head": wrong_kv_head,
    "wrong_statistic_row": wrong_statistic_row,
    "wrong_reduction_width": wrong_reduction_width,
    "wrong_expert_index": wrong_expert_index,
    "ldmatrix_matrix_order": ldmatrix_matrix_order,
    "drop_mask": drop_mask,
    "widen_mask": widen_mask,
    "narrow_mask": narrow_mask,
    "wait_group_count": wait_group_count,
}


def mutants(text: str, operators: list[str] | None = None, first_only: bool = True) -> list[Mutant]:
    """Every applicable mutant of a kernel source (the first site of each operator by default)."""
    out = []
    for name in operators or list(OPERATORS):
        found = OPERATORS[name](text)
        out.extend(found[:1] if first_only else found)
    return out
