"""The one error type for bad user input: one line naming the file, the key and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


class BenchInputError(Exception):
    """Bad input from the user's files or command line. The CLI prints it and exits 2."""

    def __init__(self, file: str | Path | None, key: str | None, problem: str):
        self.file = str(file) if file is not None else None
        self.key = key
        # One line, always: a value quoted in the message may itself hold a line break.
        self.problem = problem.replace("\r", "\\r").replace("\n", "\\n")
        where = ": ".join(p for p in (self.file, key) if p)
        super().__init__(f"{where}: {self.problem}" if where else self.problem)


def closest(word: str, options: Iterable[str]) -> str:
    """A 'did you mean' suffix naming the closest valid option, or listing them all."""
    options = sorted(options)
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    if match:
        return f"did you mean '{match[0]}'? (valid: {', '.join(options)})"
    return f"valid: {', '.join(options)}"
