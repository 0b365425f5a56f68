"""Writing a file atomically, so a reader never sees half of it: a report or an artifact at the
path a user gave (without replacing what is not a regular file, a device or a pipe, or a link),
or an entry of the build cache."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import UsageError

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes, private: bool = False) -> None:
    """Write `data` through a temporary file in the same directory, then rename it into place.

    A link is followed (the file it names is replaced, the link stays); a path that names no regular
    file, such as /dev/stdout or a FIFO, is written in place: renaming over it would replace the
    device or pipe with a file. Every failure is a one-line UsageError (exit 2). `private` keeps
    the file readable by its owner only (a cache entry), else it gets the umask's permissions."""
    if os.path.exists(path) and not os.path.isfile(path):
        if os.path.isdir(path):
            raise UsageError(f"cannot write {path}: it is a directory")
        try:
            with open(path, "wb") as out:
                out.write(data)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
        return
    if not path.parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {path.parent}")
    target = Path(os.path.realpath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make a report others cannot read
        os.replace(tmp, target)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
