"""Workspace-confined file and command tools for the built-in `anthropic` agent.

Every path the model gives is resolved (symlinks followed) and refused unless it stays inside
the workspace: `../outside`, absolute paths elsewhere and symlinks pointing out are answered
with an error result and nothing is touched. Writes into `.git` are refused too (hooks there
would run on the harness's own git commands). Commands are argument arrays (no shell) run through
`run_command` in the workspace, with the trial's scrubbed environment and a timeout capped by
the trial's time left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_pipeline.workspace.process import run_command

MAX_TOOL_OUTPUT = 10_000  # characters of command output / file text handed back to the model
MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 1000
DEFAULT_COMMAND_TIMEOUT = 120.0
MAX_COMMAND_TIMEOUT = 600.0
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"}

TOOL_DEFINITIONS: dict[str, dict[str, Any]] = {
    "list_files": {
        "name": "list_files",
        "description": (
            "List files under a directory of the workspace (recursively, skipping .git and "
            "dependency folders). Paths are relative to the workspace root."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory relative to the workspace root (default '.').",
                }
            },
        },
    },
    "read_file": {
        "name": "read_file",
        "description": "Read a text file of the workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "File path."}},
            "required": ["path"],
        },
    },
    "write_file": {
        "name": "write_file",
        "description": "Create or overwrite a file of the workspace with the given content.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path."},
                "content": {"type": "string", "description": "The complete new content."},
            },
            "required": ["path", "content"],
        },
    },
    "edit_file": {
        "name": "edit_file",
        "description": (
            "Replace one exact occurrence of old_string with new_string in a file. old_string "
            "must occur exactly once; include surrounding lines to make it unique."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
    "run_command": {
        "name": "run_command",
        "description": (
            "Run a program in the workspace root as an argument array (no shell: no pipes, "
            'redirection or globbing), e.g. ["python", "-m", "pytest", "-q"]. Returns the '
            "exit code and the combined output (long output keeps its head and tail)."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "timeout_seconds": {
                    "type": "number",
                    "description": f"Default {DEFAULT_COMMAND_TIMEOUT:.0f}, at most "
                    f"{MAX_COMMAND_TIMEOUT:.0f} (and never past the trial's deadline).",
                },
            },
            "required": ["command"],
        },
    },
}


class ToolError(Exception):
    """A refusal or failure reported to the model as an `is_error` tool result."""


@dataclass
class ToolOutcome:
    text: str
    is_error: bool = False


def truncate_middle(text: str, limit: int = MAX_TOOL_OUTPUT) -> str:
    """Keep the head and the tail (errors are usually at the end, the context at the start)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[... {omitted} characters omitted ...]\n{text[-half:]}"


class Toolbox:
    """The tools offered to the model for one trial's workspace."""

    def __init__(
        self,
        workspace: Path,
        env: Mapping[str, str],
        seconds_left: Callable[[], float],
        names: tuple[str, ...] | list[str] = tuple(TOOL_DEFINITIONS),
        cancelled: Callable[[], bool] | None = None,
    ):
        self.root = Path(workspace).resolve()
        self.env = dict(env)
        self.seconds_left = seconds_left
        self.names = tuple(n for n in names if n in TOOL_DEFINITIONS)
        self.cancelled = cancelled

    def definitions(self) -> list[dict[str, Any]]:
        return [TOOL_DEFINITIONS[n] for n in self.names]

    # ------------------------------------------------------------ confinement

    def resolve(self, raw: Any, for_write: bool = False) -> Path:
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string")
        if "\x00" in raw:
            raise ToolError("path contains a NUL byte")
        candidate = (
            self.root / raw
        ).resolve()  # absolute `raw` replaces the root; symlinks followed
        if candidate != self.root and not candidate.is_relative_to(self.root):
            raise ToolError(f"refused: '{raw}' is outside the workspace")
        rel = candidate.relative_to(self.root)
        if for_write and rel.parts and rel.parts[0] == ".git":
            raise ToolError(f"refused: '{raw}' is inside .git")
        return candidate

    def display(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return rel or "."

    # ------------------------------------------------------------ dispatch

    def call(self, name: str, args: Any) -> ToolOutcome:
        if name not in self.names:
            return ToolOutcome(
                f"unknown tool '{name}'; available: {', '.join(self.names)}", is_error=True
            )
        if not isinstance(args, dict):
            return ToolOutcome("tool input must be a JSON object", is_error=True)
        try:
            return getattr(self, f"_{name}")(args)
        except ToolError as exc:
            return ToolOutcome(str(exc), is_error=True)
        except (OSError, UnicodeError) as exc:
            return ToolOutcome(f"{type(exc).__name__}: {exc}", is_error=True)

    def _list_files(self, args: dict[str, Any]) -> ToolOutcome:
        base = self.resolve(args.get("path") or ".")
        if not base.is_dir():
            raise ToolError(f"'{args.get('path')}' is not a directory")
        found: list[str] = []
        stack = [base]
        while stack and len(found) < MAX_LIST_ENTRIES:
            current = stack.pop()
            for entry in sorted(current.iterdir(), reverse=True):
                if entry.is_symlink():
                    found.append(self.display_unresolved(entry) + " -> (symlink)")
                elif entry.is_dir():
                    if entry.name not in SKIP_DIRS:
                        stack.append(entry)
                else:
                    found.append(self.display_unresolved(entry))
        found.sort()
        more = "\n[listing truncated]" if len(found) >= MAX_LIST_ENTRIES else ""
        return ToolOutcome("\n".join(found[:MAX_LIST_ENTRIES]) + more or "(empty)")

    def display_unresolved(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _read_file(self, args: dict[str, Any]) -> ToolOutcome:
        path = self.resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"'{args.get('path')}' is not a file")
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            text = text[:MAX_READ_CHARS] + f"\n[file truncated at {MAX_READ_CHARS} characters]"
        return ToolOutcome(text)

    def _write_file(self, args: dict[str, Any]) -> ToolOutcome:
        path = self.resolve(args.get("path"), for_write=True)
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        if path.is_dir():
            raise ToolError(f"'{args.get('path')}' is a directory")
        # Parents are created only inside the (already confined) resolved path.
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return ToolOutcome(f"wrote {len(content)} characters to {self.display(path)}")

    def _edit_file(self, args: dict[str, Any]) -> ToolOutcome:
        path = self.resolve(args.get("path"), for_write=True)
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError("old_string and new_string must be strings")
        if not old:
            raise ToolError("old_string must not be empty")
        if not path.is_file():
            raise ToolError(f"'{args.get('path')}' is not a file")
        text = path.read_text(encoding="utf-8")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in {self.display(path)}")
        if count > 1:
            raise ToolError(
                f"old_string occurs {count} times in {self.display(path)}; make it unique"
            )
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return ToolOutcome(f"edited {self.display(path)}")

    def _run_command(self, args: dict[str, Any]) -> ToolOutcome:
        argv = args.get("command")
        if isinstance(argv, str):
            raise ToolError('command must be an argument array, e.g. ["ls", "-la"]; no shell')
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ToolError("command must be a non-empty array of strings")
        requested = args.get("timeout_seconds")
        try:
            timeout = float(requested) if requested is not None else DEFAULT_COMMAND_TIMEOUT
        except (TypeError, ValueError):
            raise ToolError("timeout_seconds must be a number") from None
        timeout = max(0.0, min(timeout, MAX_COMMAND_TIMEOUT, self.seconds_left()))
        if timeout <= 0:
            raise ToolError("no time left in this trial")
        res = run_command(argv, self.root, self.env, timeout, cancelled=self.cancelled)
        if res.timed_out:
            head = f"[killed after {timeout:.0f}s timeout]"
        elif res.cancelled:
            head = "[cancelled]"
        else:
            head = f"[exit code {res.exit_code}]"
        return ToolOutcome(f"{head}\n{truncate_middle(res.output)}", is_error=res.exit_code is None)
