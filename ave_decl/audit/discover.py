"""Which files an audit reads: the `.ave` files under the given paths, and every one it cannot read.

Entries are classified with stat(2) only, nothing is opened here, so a FIFO or a device named
`*.ave` cannot block the audit. Anything named `*.ave` that is not a regular file (a directory, a
dangling symbolic link, a symbolic-link loop, a FIFO, a socket, a device) and every directory that
cannot be listed is reported as unreadable, the way `ave check` reports a file it cannot read, and
the rest of the batch goes on. Symbolic links to directories are not followed (no loops); a
directory named `*.ave` is reported and its contents are still audited.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..lang.errors import ExitCode
from ..report.model import ErrorReport

_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a FIFO (named pipe)"),
          (stat.S_ISSOCK, "is a socket"), (stat.S_ISCHR, "is a character device"),
          (stat.S_ISBLK, "is a block device"))


def unreadable(path: str, why: str) -> ErrorReport:
    """The same error `ave check` gives for a file it cannot read (kind usage, exit 2)."""
    return ErrorReport(path, "usage", f"cannot read {path}: {why}", None, f"{path}: error: cannot read file: {why}",
                       int(ExitCode.USAGE))


def _not_regular(mode: int) -> str:
    for test, why in _KINDS:
        if test(mode):
            return why
    return "not a regular file"


def _stat_failure(path: str, exc: OSError) -> str:
    """Why following `path` failed: a dangling link and a link loop say so."""
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"dangling symbolic link (to {os.readlink(path)})"
    return exc.strerror or type(exc).__name__


def classify(path: str) -> str | None:
    """None for a regular file (symbolic links followed), else why it cannot be audited."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return _stat_failure(path, exc)
    return None if stat.S_ISREG(mode) else _not_regular(mode)


def _walk(directory: Path, found: list[tuple[str, str | None]]) -> None:
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        found.append((str(directory), f"cannot list directory: {exc.strerror or type(exc).__name__}"))
        return
    for entry in entries:
        child = directory / entry.name
        try:
            real_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            real_dir = False
        if real_dir:
            if entry.name.endswith(".ave"):
                found.append((str(child), "is a directory"))
            _walk(child, found)
        elif entry.name.endswith(".ave"):
            found.append((str(child), classify(str(child))))


def discover(paths: list[str]) -> tuple[list[str], list[ErrorReport]]:
    """`.ave` files under the given paths (recursively, sorted, each once), and the unreadable ones."""
    files: list[str] = []
    errors: list[ErrorReport] = []
    seen: set[str] = set()
    for p in paths:
        path = Path(p)
        try:
            mode: int | None = os.stat(path).st_mode
        except OSError as exc:
            mode = None
            if not os.path.islink(path) and exc.errno == errno.ENOENT:
                errors.append(ErrorReport(p, "usage", f"no such file or directory: {p}", None,
                                          f"{p}: error: no such file or directory", int(ExitCode.USAGE)))
                continue
            found = [(str(path), _stat_failure(str(path), exc))]
        if mode is not None and stat.S_ISDIR(mode):
            found = []
            _walk(path, found)
            found.sort(key=lambda x: x[0])
        elif mode is not None:
            found = [(str(path), None if stat.S_ISREG(mode) else _not_regular(mode))]
        for f, why in found:
            if f in seen:
                continue
            seen.add(f)
            if why is None:
                files.append(f)
            else:
                errors.append(unreadable(f, why))
    return files, errors


def read_regular(path: str, limit: int | None = None) -> bytes:
    """The bytes of a regular file, opened without blocking (a FIFO swapped in after discovery
    raises instead of hanging). OSError when it cannot be read; its `strerror` says why."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, _not_regular(st.st_mode))
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            data = fh.read() if limit is None else fh.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        return data
    finally:
        if fd >= 0:
            os.close(fd)
