"""Atomic file writes: a file is either complete or absent, never half written."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    """The process umask, read without changing it where the system allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # POSIX has no read-only query: set and restore at once
    os.umask(mask)
    return mask


def _new_file_mode(path: Path) -> int:
    """The permission bits ``open(path, "w")`` would leave: an existing file keeps its own,
    a new one gets 0666 less the umask (`tempfile.mkstemp` alone would give 0600)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def atomic_write(path, write: Callable[[BinaryIO], object]) -> None:
    """Calls ``write(handle)`` on a temporary file beside ``path`` (creating the folder),
    flushes and fsyncs it, then renames it into place. The file gets the permissions an
    ordinary write would give (the umask; an existing file's own mode). On any error the
    temporary file is removed and the error propagates (an `OSError` names ``path``); an
    existing ``path`` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), _new_file_mode(path))
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.filename is None and err.errno is not None:
            # Writes to a handle (np.savez, fsync) raise without a file name: add it.
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    """`atomic_write` of a bytes object."""
    atomic_write(path, lambda handle: handle.write(data))
