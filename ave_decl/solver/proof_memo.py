"""Proved queries remembered by the content of their formulas, across kernels of one process.

Why: agent loops (planner episodes, repair candidates), batch audits and fuzzing check many
kernels that differ in one statement or only in their name; most of their queries are the same
formulas, and each costs a div/mod normalisation and a budgeted Z3 portfolio again. A query
is keyed by a digest of its formulas, built bottom-up over Z3's term DAG (memoised per term, so
a kernel's shared instances, chains and base constraints are digested once), where every free
variable is known by its sort, the value range the encoder recorded for it (the normaliser
relies on those ranges, so they are part of what was proved) and the pattern of its
occurrences, not by its name (see FormulaDigester).

Only UNSAT is remembered, and an UNSAT is a property of the formulas alone: the same formulas
(the same operators, numerals, sorts and ranges, with variables renamed consistently, up to a
128-bit digest) are unsatisfiable whichever kernel built them. A SAT or an unknown is never remembered, so counterexamples are
always the solver's own. Queries with uninterpreted function applications (index-tensor reads,
whose value ranges come from elsewhere) or quantifiers are not digested. `AVE_PROOF_MEMO=off`
turns the memo off (bench/check.py measures with it off unless asked).
"""
from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import z3

from ..lang.errors import UsageError
from ..lang.files import write_atomic
from .raw_terms import (_app_decl, _arg, _ast_id, _ast_kind, _decl_kind, _get_sort, _num_args, _numeral_string,
                        _sort_kind, _unchecked)

CAPACITY = 200_000  # remembered proofs per process (16-byte keys): a few MB
VIOLATION_CAPACITY = 4096  # remembered canonical models of violated queries per process (in memory only)
_decl_name = _unchecked(z3.Z3_get_decl_name)
_symbol_string = _unchecked(z3.Z3_get_symbol_string)


def enabled() -> bool:
    return os.environ.get("AVE_PROOF_MEMO", "on").lower() not in ("off", "0", "no", "false")


class Learned(NamedTuple):
    """Proof keys and violations' (key, (size positions, values)) a process learned."""

    proofs: list[bytes]
    violations: list[tuple[bytes, tuple[tuple[int, ...], tuple[int | bool, ...]]]]


class ProofMemo:
    """Digests of proved queries, most recently used last (bounded), optionally backed by a
    proof file (`attach`) that other processes read and append to."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._proved: OrderedDict[bytes, None] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self._store: ProofFile | None = None
        self._violations: OrderedDict[bytes, tuple[tuple[int, ...], tuple[int | bool, ...]]] = OrderedDict()
        self._violation_store: ViolationFile | None = None
        self._journal: Learned | None = None  # what was learned since `start_journal`, when on

    def violation(self, key: bytes | None) -> tuple[tuple[int, ...], tuple[int | bool, ...]] | None:
        """The canonical model of a violated query seen before: the positions (in the query's
        free constants, first-occurrence order) of the kernel's sizes, which the small-model
        search bounds and so are part of what decided the model, and the constants' values.
        Why it may be reused: the canonical model is a function of the query's text up to
        renaming (solver/canonical_model.py), which the key stands for; a bank conflict's point
        model (solver/point_model.py) is one of the query and its point, whose values the query
        pins and whose frames are parts of it (the assumptions and launch, loop and guard
        constraints an alpha-equivalent query has in the same places)."""
        found = self._violations.get(key) if key is not None else None
        if found is not None:
            self._violations.move_to_end(key)
        return found

    def remember_violation(self, key: bytes | None, sizes: tuple[int, ...], values: tuple[int | bool, ...]) -> None:
        if key is None:
            return
        if self._violation_store is not None and key not in self._violations:
            self._violation_store.append(ViolationFile.record(key, sizes, values))
        if self._journal is not None and key not in self._violations:
            self._journal.violations.append((key, (sizes, values)))
        self._keep_violations(((key, (sizes, values)),))

    def attach(self, path: Path | None) -> None:
        """Read the proofs of `path` (a proof file, created if absent) and the violations' models
        of the violation file beside it, and append new ones to them; None detaches. A file that
        cannot be read or written leaves the memo in memory only."""
        if self._store is not None and (path is None or self._store.path != path):
            self._store.close()
            self._store = None
            if self._violation_store is not None:
                self._violation_store.close()
                self._violation_store = None
        if path is None or self._store is not None:
            return
        store = ProofFile.open(path, self.capacity)
        if store is None:
            return
        self._keep_proofs(store.keys()[-max(1, self.capacity):])
        self._store = store
        violations = ViolationFile.open(path.with_name(VIOLATION_FILE), VIOLATION_CAPACITY)
        if violations is not None:
            self._keep_violations(violations.models()[-VIOLATION_CAPACITY:])
            self._violation_store = violations

    def start_journal(self) -> None:
        """Record from now on the proofs and violations' models this process learns (`journal`):
        an audit chunk's forked child sends them to the parent, whose later children start
        with them (`learn`)."""
        self._journal = Learned([], [])

    def journal(self) -> Learned:
        return self._journal if self._journal is not None else Learned([], [])

    def learn(self, learned: Learned) -> None:
        """Take proofs and models another process learned (in memory: a proof file, if any, got
        them from that process). Both are keyed by the query's digest, so, as with a proof file,
        what a kernel is told depends only on its queries."""
        self._keep_proofs(learned.proofs)
        self._keep_violations(learned.violations)

    def _keep_proofs(self, keys) -> None:
        """In memory, most recent last, the oldest dropped past the capacity."""
        for key in keys:
            self._proved[key] = None
            self._proved.move_to_end(key)
        while len(self._proved) > self.capacity:
            self._proved.popitem(last=False)

    def _keep_violations(self, models) -> None:
        for key, model in models:
            self._violations[key] = model
            self._violations.move_to_end(key)
        while len(self._violations) > VIOLATION_CAPACITY:
            self._violations.popitem(last=False)

    def proved(self, key: bytes | None) -> bool:
        if key is None or key not in self._proved:
            if key is not None:
                self.misses += 1
            return False
        self._proved.move_to_end(key)
        self.hits += 1
        return True

    def remember(self, key: bytes | None) -> None:
        if key is None:
            return
        if self._store is not None and key not in self._proved:
            self._store.append(key)
        if self._journal is not None and key not in self._proved:
            self._journal.proofs.append(key)
        self._keep_proofs((key,))

    def clear(self) -> None:
        """Forget every proof and detach the proof file (as a new process starts)."""
        self._proved.clear()
        self._violations.clear()
        self.hits = self.misses = 0
        self.attach(None)


class RecordFile:
    """An append-only file of records after a 16-byte header.

    Appends are single `write`s of one record to a descriptor opened with O_APPEND, so
    concurrent processes (audit workers) never interleave records; a short write (a full disk)
    stops appending, and a torn tail is cut off on the next open. The file is created private
    (0600); a file or folder that is not this user's, or that others can write, or a link, is
    not used (the memo stays in memory). Concurrent rotation or creation can lose records, never
    make one up. Past `capacity` records it is rewritten, on the next open, with its newest
    half. Subclasses say how records are delimited (`_split`)."""

    MAGIC = b""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def open(cls, path: Path, capacity: int = CAPACITY):
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return None
        store = cls(path, fd)
        if not (_private(os.fstat(fd)) and _private(os.stat(path.parent))):
            store.close()  # another user's, or writable by others: anyone could forge a record
            return None
        try:
            size = os.fstat(fd).st_size
            if size == 0 or os.pread(fd, len(cls.MAGIC), 0) != cls.MAGIC:
                os.ftruncate(fd, 0)
                os.write(fd, cls.MAGIC)
            else:
                records, whole = cls._split(store._body())
                if whole < size - len(cls.MAGIC):  # a torn last record: later appends must follow a whole one
                    os.ftruncate(fd, len(cls.MAGIC) + whole)
                elif len(records) > capacity:
                    store.close()
                    write_atomic(path, cls.MAGIC + b"".join(records[-max(1, capacity // 2):]), private=True)
                    return cls.open(path, capacity)
        except (OSError, UsageError):
            store.close()
            return None
        return store

    @classmethod
    def _split(cls, body: bytes) -> tuple[list[bytes], int]:
        """The whole records of `body`, each as written, and the length they take."""
        raise NotImplementedError

    def _body(self) -> bytes:
        if self._fd is None:
            return b""
        try:
            return os.pread(self._fd, os.fstat(self._fd).st_size, 0)[len(self.MAGIC):]
        except OSError:
            return b""

    def records(self) -> list[bytes]:
        return self._split(self._body())[0]

    def append(self, record: bytes) -> None:
        if self._fd is None:
            return
        try:
            if os.write(self._fd, record) == len(record):
                return
        except OSError:
            pass
        self.close()  # a full disk costs later runs these records, nothing else

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


class ProofFile(RecordFile):
    """Proof digests, 16 bytes each. Its content is data: a record is only ever compared with a
    digest, never decoded."""

    MAGIC = b"ave-proofs-v1\0\0\0"

    @classmethod
    def _split(cls, body: bytes) -> tuple[list[bytes], int]:
        whole = len(body) - len(body) % 16
        return [body[i:i + 16] for i in range(0, whole, 16)], whole

    def keys(self) -> list[bytes]:
        return self.records()


# v2: values of the free constants before normalisation; v3: a bank conflict's model may be its
# point's (solver/point_model.py), not the canonical model a v2 file holds
VIOLATION_FILE = "violations-v3.bin"
_MAX_MODEL_BYTES = 1 << 20


class ViolationFile(RecordFile):
    """Canonical models of violated queries (ProofMemo.violation), so that another process (an
    audit's next chunk, an agent's next candidate with --proof-cache) does not solve a violation
    again. A record: the 16-byte key, the payload's length (4 bytes, little-endian), the payload
    `sizes|values` in ASCII (comma-separated integers; T and F for Booleans). Its content is data:
    a payload is read as integers only, and a model read back is used only after it is checked
    to satisfy the query it is offered for (canonical_model.model_of_values), so a forged record
    can at most choose which true counterexample is printed. A record that does not decode ends
    the file (what follows it is cut off on the next open, as a torn tail)."""

    MAGIC = b"ave-violations1\0"

    @staticmethod
    def record(key: bytes, sizes: tuple[int, ...], values: tuple[int | bool, ...]) -> bytes:
        payload = (",".join(map(str, sizes)) + "|" + ",".join(
            ("T" if v else "F") if isinstance(v, bool) else str(v) for v in values)).encode("ascii")
        return key + len(payload).to_bytes(4, "little") + payload

    @classmethod
    def _split(cls, body: bytes) -> tuple[list[bytes], int]:
        out, at = [], 0
        while at + 20 <= len(body):
            n = int.from_bytes(body[at + 16:at + 20], "little")
            if n > _MAX_MODEL_BYTES or at + 20 + n > len(body) or _decode(body[at + 20:at + 20 + n]) is None:
                break
            out.append(body[at:at + 20 + n])
            at += 20 + n
        return out, at

    def models(self) -> list[tuple[bytes, tuple[tuple[int, ...], tuple[int | bool, ...]]]]:
        return [(r[:16], _decode(r[20:])) for r in self.records()]  # type: ignore[misc]


def _decode(payload: bytes) -> tuple[tuple[int, ...], tuple[int | bool, ...]] | None:
    """`sizes|values` back into integers and Booleans, or None."""
    try:
        text = payload.decode("ascii")
        sizes_text, values_text = text.split("|")
        sizes = tuple(int(x) for x in sizes_text.split(",")) if sizes_text else ()
        values = tuple(True if x == "T" else False if x == "F" else int(x)
                       for x in values_text.split(",")) if values_text else ()
    except ValueError:  # UnicodeDecodeError is one, and so is an integer past Python's digit limit
        return None
    return (sizes, values) if all(x >= 0 for x in sizes) else None


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else (a regular file or a folder)."""
    import stat

    return (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) and st.st_uid == os.geteuid() \
        and not st.st_mode & 0o022


def store_path(folder: str | os.PathLike) -> Path:
    """The proof file of a cache folder (`ave check --proof-cache DIR`, the audit's cache)."""
    return Path(folder) / "proofs" / "proofs-v1.bin"


MEMO = ProofMemo()


def proved_by(key: bytes | None, prove: Callable[[], bool]) -> bool:
    """Whether the query of `key` was proved before, or `prove()` proves it now (then it is
    remembered); a None key (not digested, memo off) always asks `prove`."""
    if MEMO.proved(key):
        return True
    proved = prove()
    if proved:
        MEMO.remember(key)
    return proved


class FormulaDigester:
    """Content digests of one kernel's Z3 terms (one Z3 context), memoised by AST id, that do
    not depend on the names of free variables (alpha-invariant): a candidate kernel whose edit
    shifts the encoder's fresh-name counter still meets the proofs of its unchanged queries.

    Each term's entry is its shape digest and its free variables in first-occurrence order;
    the shape hashes, per argument, where that argument's variables fall in the parent's list,
    so `x - y` and `x - x` differ while `u3.lane - u4.lane` and `u7.lane - u9.lane` agree.
    Renaming every free constant of a closed formula consistently keeps its satisfiability,
    which is why a query's key may forget names (and sorts and ranges are hashed instead).
    Entries keep a reference to the formulas asked for, so Z3 never reuses a remembered id.
    `forget` drops everything: the encoder calls it when a variable gets a range after terms
    over it were digested."""

    def __init__(self, ctx: z3.Context, ranges: dict[int, tuple[int, int]]):
        self.ctx = ctx
        self._cref = ctx.ref()
        self.ranges = ranges
        self._memo: dict[int, tuple[bytes, tuple[int, ...]] | None] = {}
        self._keep: list[z3.ExprRef] = []

    def knows(self, key: int) -> bool:
        return key in self._memo

    def forget(self) -> None:
        self._memo.clear()
        self._keep.clear()

    def key(self, formulas: list[z3.BoolRef]) -> bytes | None:
        """The digest of a query (None when it cannot be digested: see the module docstring)."""
        entries = self._entries(formulas)
        if entries is None:
            return None
        h = _keyed_hash()
        _combine(h, entries)
        return h.digest()

    def chunked_key(self, chunks: list[list[z3.BoolRef]], prefixes: dict) -> bytes | None:
        """`key` of the chunks joined (the same digest), keeping in `prefixes` the digest's state
        after each proper prefix of the chunks, by their ids: the slices of one obligation
        start with the same chunks (the base, the use's constraints, one side's), which are
        then fed once. Every chunk but the last must stay alive and unchanged while the caller
        keeps `prefixes` (an id is only a list's while it lives)."""
        state = prefixes.get(())
        if state is None:
            state = prefixes[()] = (_keyed_hash(), {})
        ids: tuple[int, ...] = ()
        for chunk in chunks[:-1]:
            ids += (id(chunk),)
            known = prefixes.get(ids, _UNSEEN)
            state = self._extended(state, chunk) if known is _UNSEEN else known
            prefixes[ids] = state
            if state is None:
                return None
        state = self._extended(state, chunks[-1])
        return None if state is None else state[0].digest()

    def _extended(self, state: tuple, chunk: list[z3.BoolRef]) -> tuple | None:
        """The digest's state (hash, variables' positions) with the chunk's formulas fed."""
        entries = self._entries(chunk)
        if entries is None:
            return None
        h, index = state[0].copy(), dict(state[1])
        _combine(h, entries, index)
        return h, index

    def _entries(self, formulas: list[z3.BoolRef]) -> list[tuple[bytes, tuple[int, ...]]] | None:
        c, memo = self._cref, self._memo
        entries = []
        for f in formulas:
            a = f.as_ast()
            found = _ast_id(c, a)
            e = memo.get(found, _UNSEEN)
            if e is _UNSEEN:
                self._keep.append(f)  # its id stays its own while the entry lives
                e = self._digest(a, found)
            if e is None:
                return None
            entries.append(e)
        return entries

    def _digest(self, a: z3.Ast, key: int) -> tuple[bytes, tuple[int, ...]] | None:
        """The entry of term `a` (AST id `key`, not memoised yet). Hot (a tenth of an audit):
        each C getter is called once per term, and a memoised argument is read without a call."""
        c, memo = self._cref, self._memo
        out: tuple[bytes, tuple[int, ...]] | None = None
        kind = _ast_kind(c, a)
        if kind == z3.Z3_APP_AST:
            sort = _sort_name(c, _get_sort(c, a))
            # an array or datatype: its kind alone would not say its domain (not digested)
            if sort is not None:
                n = _num_args(c, a)
                op = _decl_kind(c, _app_decl(c, a))
                head = b"(%d/%d:%s" % (op, n, sort)
                if op == z3.Z3_OP_UNINTERPRETED:
                    # a free constant: its range, not its name; an application (an index-tensor
                    # read) is not digested: its value facts live outside the formulas
                    if n == 0:
                        rng = self.ranges.get(key)
                        if rng is not None:
                            head += b"[%d,%d]" % rng
                        out = (hashlib.blake2b(head, digest_size=16).digest(), (key,))
                elif op in _INTERPRETED:
                    kids = []
                    for i in range(n):
                        arg = _arg(c, a, i)
                        arg_key = _ast_id(c, arg)
                        e = memo.get(arg_key, _UNSEEN)
                        if e is _UNSEEN:
                            e = self._digest(arg, arg_key)
                        if e is None:
                            break
                        kids.append(e)
                    else:
                        h = hashlib.blake2b(head, digest_size=16)
                        variables = _combine(h, kids)
                        out = (h.digest(), variables)
        elif kind == z3.Z3_NUMERAL_AST:
            sort = _sort_name(c, _get_sort(c, a))
            if sort is not None:
                text = b"#%s:" % sort + _numeral_string(c, a)  # bytes, as z3py's str encoded
                out = (hashlib.blake2b(text, digest_size=16).digest(), ())
        # quantifiers and bound variables: not digested
        memo[key] = out
        return out


_UNSEEN = object()


def _keyed_hash():
    """A query digest's hash before its formulas: Z3's version is part of what was proved."""
    h = hashlib.blake2b(digest_size=16, person=b"ave-proof-v1")
    h.update(z3.get_full_version().encode())
    return h


def _combine(h, entries: list[tuple[bytes, tuple[int, ...]]], index: dict[int, int] | None = None) -> tuple[int, ...]:
    """Feed the entries' shapes and the positions of their variables in the combined
    first-occurrence list into `h` (one update: the same digest as one update per piece);
    return that list. `index`: the positions of the variables fed before (extended here)."""
    if index is None:
        index = {}
    fed = bytearray()
    for shape, variables in entries:
        fed += shape
        for v in variables:
            pos = index.get(v)
            if pos is None:
                pos = index[v] = len(index)
            fed += pos.to_bytes(4, "little")
        fed += b")"
    h.update(fed)
    return tuple(index)


# Sorts that a sort kind names completely (no width, domain or parameters)
_PLAIN_SORTS = frozenset({z3.Z3_BOOL_SORT, z3.Z3_INT_SORT, z3.Z3_REAL_SORT})
_bv_size = _unchecked(z3.Z3_get_bv_sort_size)


def _sort_name(c, sort) -> bytes | None:
    """A sort's digest text: its kind, and a bit-vector's width too (XOR on wide operands is
    encoded through Int2BV, smt.py); None for a sort its kind and width do not name (arrays,
    datatypes), whose terms are not digested."""
    kind = _sort_kind(c, sort)
    if kind in _PLAIN_SORTS:
        return b"%d" % kind
    if kind == z3.Z3_BV_SORT:
        return b"%d.%d" % (kind, _bv_size(c, sort))
    return None


# Operators whose meaning is fixed by their kind, sort and arguments alone (the rest, e.g.
# operators with numeric parameters such as extract, are not digested).
_INTERPRETED = frozenset({
    z3.Z3_OP_TRUE, z3.Z3_OP_FALSE, z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT, z3.Z3_OP_ITE, z3.Z3_OP_AND, z3.Z3_OP_OR,
    z3.Z3_OP_IFF, z3.Z3_OP_XOR, z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES,
    z3.Z3_OP_LE, z3.Z3_OP_GE, z3.Z3_OP_LT, z3.Z3_OP_GT, z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS,
    z3.Z3_OP_MUL, z3.Z3_OP_DIV, z3.Z3_OP_IDIV, z3.Z3_OP_REM, z3.Z3_OP_MOD, z3.Z3_OP_TO_REAL, z3.Z3_OP_TO_INT,
    z3.Z3_OP_IS_INT, z3.Z3_OP_ABS,
    # bit-vector operators without index parameters: the sorts (widths) of the term and its
    # arguments, which the digest holds, fix them (Int2BV's width is its result's)
    z3.Z3_OP_INT2BV, z3.Z3_OP_BV2INT, z3.Z3_OP_BAND, z3.Z3_OP_BOR, z3.Z3_OP_BXOR, z3.Z3_OP_BNOT,
    z3.Z3_OP_BNEG, z3.Z3_OP_BADD, z3.Z3_OP_BSUB, z3.Z3_OP_BMUL, z3.Z3_OP_CONCAT,
    z3.Z3_OP_ULEQ, z3.Z3_OP_SLEQ, z3.Z3_OP_UGEQ, z3.Z3_OP_SGEQ, z3.Z3_OP_ULT, z3.Z3_OP_SLT, z3.Z3_OP_UGT, z3.Z3_OP_SGT,
})
