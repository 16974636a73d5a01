"""Run one command as its own process group with a scrubbed environment and a hard timeout.

Every agent and grader process goes through `run_command`: argument arrays only (no shell),
a new session so that a timeout kills the whole group, children included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Variables every child gets (when set in our environment); everything else is scrubbed unless
# the agent's `env` allow-list names it.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
MAX_OUTPUT_BYTES = 1_000_000


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None  # None when killed at timeout or cancelled
    output: str  # stdout and stderr interleaved, truncated to MAX_OUTPUT_BYTES
    timed_out: bool
    duration_seconds: float
    pid: int | None = None
    cancelled: bool = False


def scrubbed_env(
    allow: Iterable[str] = (), extra: Mapping[str, str] | None = None, home: Path | None = None
) -> dict[str, str]:
    """A minimal environment: the base variables, the allow-listed ones, then `extra`."""
    env = {k: os.environ[k] for k in (*BASE_ENV, *allow) if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["GIT_TERMINAL_PROMPT"] = "0"
    if home is not None:
        env["HOME"] = str(home)
    env.update(extra or {})
    return env


# What graders (checks, the tests runner) get on top of `scrubbed_env`, unless a check's or the
# tests criterion's `env` overrides or unsets (null) it: pytest plugin auto-loading costs ~0.7 s
# per grader run (measured) and makes a grade depend on whatever plugins happen to be installed.
# Agents and prepare commands never get it.
GRADER_DEFAULTS = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def grader_env(
    home: Path | None, overrides: Iterable[tuple[str, str | None]] = ()
) -> dict[str, str]:
    """The environment of a grader: scrubbed, the grader defaults, then the task's `env`
    (a None value removes the variable)."""
    env = scrubbed_env(home=home, extra=GRADER_DEFAULTS)
    for name, value in overrides:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def resolve_argv(argv: list[str]) -> list[str]:
    """Map `python`/`python3` to this interpreter: skips pyenv shims (~0.2 s a call) and makes
    graders run with the same Python the harness was installed with."""
    if argv and argv[0] in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    if argv and os.sep not in argv[0]:
        found = shutil.which(argv[0])
        if found:
            return [found, *argv[1:]]
    return argv


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Process groups alive right now, with their deadline and cancel test. One watchdog thread
# kills a group at its deadline or when it is cancelled, so each command can block in wait()
# and is noticed the moment it exits (polling wait() with a timeout adds up to 50 ms per
# command, which dominated cheap graders).
@dataclass
class _Watch:
    deadline: float
    cancelled: Callable[[], bool] | None
    reason: str | None = None  # "timeout" | "cancelled" once the watchdog killed the group


_watched: dict[int, _Watch] = {}
# Where live process groups are recorded on disk (one file per group) so that a later process
# can kill what a crashed one left behind. Set per partition by the pipeline; None = off.
pid_registry: Path | None = None
_watch_lock = threading.Lock()
_watchdog: threading.Thread | None = None
WATCH_INTERVAL = 0.1


def _watch_loop() -> None:
    while True:
        time.sleep(WATCH_INTERVAL)
        now = time.monotonic()
        with _watch_lock:
            items = [(pid, w) for pid, w in _watched.items() if w.reason is None]
        for pid, watch in items:
            if now >= watch.deadline:
                watch.reason = "timeout"
            elif watch.cancelled is not None and _safe_call(watch.cancelled):
                watch.reason = "cancelled"
            else:
                continue
            kill_group(pid)


def _safe_call(fn: Callable[[], bool]) -> bool:
    try:
        return bool(fn())
    except Exception:
        return False


def _watch(pid: int, watch: _Watch) -> None:
    global _watchdog
    with _watch_lock:
        _watched[pid] = watch
        if _watchdog is None or not _watchdog.is_alive():
            _watchdog = threading.Thread(target=_watch_loop, name="bench-watchdog", daemon=True)
            _watchdog.start()


def run_command(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdin_text: str | None = None,
    cancelled: Callable[[], bool] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> CommandResult:
    """Run `argv` without a shell in a new process group; kill the group on timeout/cancel.

    Output goes to an unnamed temp file rather than a pipe so that a grandchild holding the
    pipe open cannot block us after the group leader exits.
    """
    argv = resolve_argv([str(a) for a in argv])
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=dict(env),
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(argv, None, f"cannot start {argv[0]}: {exc}", False, 0.0)
        watch = _Watch(start + max(timeout, 0.0), cancelled)
        _watch(proc.pid, watch)
        record = _record_group(proc.pid)
        if on_start:
            on_start(proc.pid)
        try:
            if stdin_text is not None:
                try:
                    proc.stdin.write(stdin_text.encode())  # type: ignore[union-attr]
                    proc.stdin.close()  # type: ignore[union-attr]
                except BrokenPipeError:
                    pass
            proc.wait()
        finally:
            # Reap stragglers: background children left behind by a finished command.
            kill_group(proc.pid)
            with _watch_lock:
                _watched.pop(proc.pid, None)
            if record is not None:
                record.unlink(missing_ok=True)
        out.seek(0)
        data = out.read(MAX_OUTPUT_BYTES + 1)
    text = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_OUTPUT_BYTES:
        text += "\n[output truncated]"
    timed_out, was_cancelled = watch.reason == "timeout", watch.reason == "cancelled"
    code = None if watch.reason else proc.returncode
    return CommandResult(
        argv, code, text, timed_out, time.monotonic() - start, proc.pid, was_cancelled
    )


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot): with the pid, it identifies a
    process even after its pid is reused."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _record_group(pid: int) -> Path | None:
    registry = pid_registry
    if registry is None:
        return None
    try:
        registry.mkdir(parents=True, exist_ok=True)
        path = registry / f"{pid}"
        path.write_text(process_start_time(pid) or "")
        return path
    except OSError:
        return None


def kill_recorded_groups(registry: Path) -> list[int]:
    """Kill the process groups recorded in `registry` whose leader is still the same process
    (pid and start time match); remove the records. Returns the groups killed."""
    killed = []
    for path in sorted(registry.glob("*")) if registry.is_dir() else []:
        try:
            pid = int(path.name)
        except ValueError:
            continue
        started = path.read_text().strip()
        if started and process_start_time(pid) == started:
            kill_group(pid)
            killed.append(pid)
        path.unlink(missing_ok=True)
    return killed
