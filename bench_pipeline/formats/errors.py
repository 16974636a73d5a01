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


class RunFailed(Exception):
    """A Dagster run of bench's failed in a step: the CLI prints it as one line. Its message
    names the failed steps and the error each ended with; `bad_input` when every one was a
    BenchInputError (a damaged warehouse file to move aside, say), which exits 2 as it would
    have outside the run, else 1 (a grader's or the harness's fault)."""

    def __init__(self, message: str, bad_input: bool = False):
        super().__init__(message)
        self.bad_input = bad_input


def input_error_names() -> frozenset[str]:
    """The class names of BenchInputError and its subclasses (a Dagster step's error is
    recorded by its class's name)."""
    names, todo = set(), [BenchInputError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(names)


def closest(word: str, options: Iterable[str]) -> str:
    """A 'did you mean' suffix naming the closest valid option, or listing them all."""
    options = sorted(options)
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    if match:
        return f"did you mean '{match[0]}'? (valid: {', '.join(options)})"
    return f"valid: {', '.join(options)}"


def malformed_yaml(exc: Exception) -> str:
    """What a YAML parser's error says, as every bench error about a YAML file says it:
    `malformed YAML at line L, column C: <the problem>`."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"malformed YAML{where}: {problem}"


def utf8_text(raw: bytes, shown: str | Path) -> str:
    """`raw`, a user's file, as text: bytes that are not UTF-8 are their input error."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchInputError(
            shown,
            None,
            f"not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8",
        ) from None


def read_input_text(path: str | Path) -> str:
    """A file the user names (a dataset, criteria, a rubric) as text: one that cannot be read
    or is not UTF-8 is a BenchInputError naming it, never a traceback."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise BenchInputError(path, None, f"cannot read: {exc.strerror}") from None
    return utf8_text(raw, path)
