"""File facts every layer needs: a whole file or none, a whole folder swapped at once, and where
an installed program is."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temp path beside `path` for the block to write; renamed over `path` when the block
    ends without an error, so a reader (or a crash) never sees half a file, and removed when
    it raises. Beside it: a rename within one file system is atomic."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def replace_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically (`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def exchange(first: str | Path, second: str | Path) -> bool:
    """Swap two folders (or files) of one file system in one step (Linux `renameat2` with
    RENAME_EXCHANGE): a reader sees the old contents or the new, never neither nor both.
    False, with nothing changed, where the system cannot (another kernel or C library, a file
    system without it, two file systems): the caller keeps what it has."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOENT, errno.ENOTDIR):  # (a missing side: the caller's error)
        raise FileNotFoundError(code, os.strerror(code), str(first), None, str(second))
    return False


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # (no such call in this C library)
        return None


def installed_program(name: str) -> str | None:
    """A console script of this installation: beside the running interpreter (a venv's bin/,
    which need not be on PATH), else on PATH; None when neither has it."""
    beside = Path(sys.executable).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
