"""Two file facts every layer needs: a whole file or none, and where an installed program is."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
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


def installed_program(name: str) -> str | None:
    """A console script of this installation: beside the running interpreter (a venv's bin/,
    which need not be on PATH), else on PATH; None when neither has it."""
    beside = Path(sys.executable).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
