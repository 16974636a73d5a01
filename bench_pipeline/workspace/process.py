"""Run one command as its own process group with a scrubbed environment and a hard timeout.

Every agent and grader process goes through `run_command`: argument arrays only (no shell),
a new session so that a timeout kills the whole group, children included; under the trial's
isolation (workspace/sandbox.py: bubblewrap, or the marked `process` fallback); output capped
as it is read.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench_pipeline.formats.vocabulary import ISOLATION_SANDBOX
from bench_pipeline.workspace import sandbox
from bench_pipeline.workspace.sandbox import Isolation

# Variables every child gets (when set in our environment); everything else is scrubbed unless
# the agent's `env` allow-list names it.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
# Default cap of one command's captured output (settable: BENCH_MAX_OUTPUT_BYTES).
MAX_OUTPUT_BYTES = 1_000_000


def output_cap() -> int:
    return evidence_cap("BENCH_MAX_OUTPUT_BYTES", MAX_OUTPUT_BYTES)


def evidence_cap(variable: str, default: int) -> int:
    """A byte cap read from the harness's environment (a positive integer), else `default`."""
    raw = os.environ.get(variable, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None  # None when killed at timeout or cancelled
    output: str  # stdout and stderr interleaved, capped at output_cap() (head and tail)
    timed_out: bool
    duration_seconds: float
    pid: int | None = None
    cancelled: bool = False
    output_bytes: int = 0  # everything the command printed, kept or not
    output_truncated: bool = False
    # the test runner's own exit code when the process ended with it (its mark: scorers.tests)
    pytest_exit: int | None = None


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
    global _watchdog
    while True:
        time.sleep(WATCH_INTERVAL)
        now = time.monotonic()
        with _watch_lock:
            if not _watched:
                # Nothing to watch: stop waking up (an idle `dagster dev` would otherwise do so
                # ten times a second); the next command starts a new watchdog under this lock.
                _watchdog = None
                return
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
    isolation: Isolation | None = None,
) -> CommandResult:
    """Run `argv` without a shell in a new process group; kill the group on timeout/cancel.

    `isolation` (default: the trial's, see `sandbox.isolated`) decides whether the command runs
    in the bubblewrap sandbox or as a marked process group. Output is read from a pipe by a
    thread that keeps at most `output_cap()` bytes (head and tail) and counts the rest: nothing
    beyond the cap reaches memory or disk. A descendant still holding the pipe after the command
    ends is killed (sandbox: with its PID namespace; process: by its marker).
    """
    isolation = isolation if isolation is not None else sandbox.current()
    argv = resolve_argv([str(a) for a in argv])
    shown_argv = argv
    env = dict(env)
    token = uuid.uuid4().hex[:12]
    base = isolation.marker if isolation is not None and isolation.marker else None
    marker = f"{base or sandbox.harness_marker('-')}/{token}"
    env[sandbox.MARKER_VAR] = marker
    missing = _missing_executable(argv[0], cwd, env)
    if missing is not None:  # as Popen would say it: the command did not start (never "exit 1")
        return CommandResult(shown_argv, None, f"cannot start {argv[0]}: {missing}", False, 0.0)
    args_fd: int | None = None
    if isolation is not None and isolation.mode == ISOLATION_SANDBOX:
        argv, args_fd = sandbox.wrap(argv, isolation, Path(cwd))
    elif isolation is not None and isolation.tmp is not None:
        env["TMPDIR"] = str(isolation.tmp)
    start = time.monotonic()
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd),
            env=env,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=write_fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(args_fd,) if args_fd is not None else (),
        )
    except OSError as exc:
        os.close(read_fd)
        return CommandResult(shown_argv, None, f"cannot start {argv[0]}: {exc}", False, 0.0)
    finally:
        os.close(write_fd)
        if args_fd is not None:
            os.close(args_fd)
    capture = _Capture(read_fd, output_cap())
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
        # Reap stragglers: background children left behind by a finished command, and in
        # process mode those that left the group (setsid) but still carry the marker.
        kill_group(proc.pid)
        if isolation is None or isolation.mode != ISOLATION_SANDBOX:
            sandbox.kill_marked(marker)
        with _watch_lock:
            _watched.pop(proc.pid, None)
        if record is not None:
            record.unlink(missing_ok=True)
        capture.finish()
    timed_out, was_cancelled = watch.reason == "timeout", watch.reason == "cancelled"
    code = None if watch.reason else proc.returncode
    output = capture.text()
    if args_fd is not None and code == 1 and output.startswith("bwrap: execvp "):
        # The executable exists on the host but not inside the sandbox: bubblewrap could not
        # start it and exits 1, which must not read as the command's own "failed".
        return CommandResult(
            shown_argv, None, f"cannot start {shown_argv[0]} in the sandbox: {output.strip()}",
            False, time.monotonic() - start, proc.pid,
        )  # fmt: skip
    if capture.truncated and isolation is not None:
        isolation.truncated_outputs.append(
            {"command": shown_argv[0], "bytes": capture.total, "kept": capture.kept}
        )
    return CommandResult(
        shown_argv,
        code,
        output,
        timed_out,
        time.monotonic() - start,
        proc.pid,
        was_cancelled,
        capture.total,
        capture.truncated,
    )


def _missing_executable(exe: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    """Why `exe` cannot be started, or None. Checked before any sandbox wraps it, because
    bubblewrap would report a missing program as its own exit code 1."""
    if os.sep in exe:
        path = Path(exe) if os.path.isabs(exe) else Path(cwd) / exe
        try:
            if not path.is_file():
                return f"[Errno 2] No such file or directory: '{exe}'"
        except OSError as exc:  # e.g. a folder on the way this user may not enter
            return str(exc)
        if not os.access(path, os.X_OK):
            return f"[Errno 13] Permission denied: '{exe}'"
        return None
    if shutil.which(exe, path=env.get("PATH", os.defpath)) is None:
        return f"[Errno 2] No such file or directory: '{exe}'"
    return None


class _Capture:
    """Drains a pipe on a thread: keeps the first and last bytes up to `cap`, counts all."""

    TAIL_SHARE = 4  # a quarter of the cap is the tail: errors are usually at the end
    DRAIN_SECONDS = 5.0

    def __init__(self, fd: int, cap: int):
        self.fd, self.cap = fd, cap
        self.tail_cap = cap // self.TAIL_SHARE
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.total = 0
        self.thread = threading.Thread(target=self._drain, name="bench-capture", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.fd, 65536):
                self.total += len(chunk)
                room = self.cap - self.tail_cap - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail.append(chunk)
                    self.tail_len += len(chunk)
                    while self.tail and self.tail_len - len(self.tail[0]) >= self.tail_cap:
                        self.tail_len -= len(self.tail.popleft())
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def finish(self) -> None:
        # A writer we could not kill (it cleared its marker) keeps the pipe open: stop waiting
        # after a while; the thread exits when that writer does.
        self.thread.join(self.DRAIN_SECONDS)

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + self.tail_len

    @property
    def kept(self) -> int:
        return len(self.head) + min(self.tail_len, self.tail_cap)

    def text(self) -> str:
        head = bytes(self.head)
        tail = b"".join(self.tail)
        if not self.truncated:
            return (head + tail).decode("utf-8", errors="replace")
        tail = tail[-self.tail_cap :] if self.tail_cap else b""
        note = (
            f"\n[output truncated: {self.total} bytes in all; kept the first {len(head)} and "
            f"the last {len(tail)}]\n"
        )
        return head.decode("utf-8", errors="replace") + note + tail.decode("utf-8", "replace")


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


def take_mark(output: str, mark: str) -> tuple[str, int | None] | None:
    """(`output` without the last mark line, the code it names) or None when there is none."""
    prefix = f"\n{mark}:"
    at = output.rfind(prefix)
    if at < 0:
        return None
    end = output.find("\n", at + len(prefix))
    if end < 0:
        return None
    text = output[at + len(prefix) : end]
    code = int(text) if text.lstrip("-").isdigit() else None
    return output[:at] + output[end + 1 :], code
