"""Two file facts every layer needs: a whole file or none, and where an installed program is."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path


def replace_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically: a temp file beside it renamed over it, so a reader
    (or a crash) never sees half of it. The temp file is removed if the write fails."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def installed_program(name: str) -> str | None:
    """A console script of this installation: beside the running interpreter (a venv's bin/,
    which need not be on PATH), else on PATH; None when neither has it."""
    beside = Path(sys.executable).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
