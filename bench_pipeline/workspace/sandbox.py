"""Where agent and grader processes run: a bubblewrap sandbox, or the weaker `process` fallback.

`sandbox` (bubblewrap, `/usr/bin/bwrap`): the system (/usr, /etc) read-only; the workspace, a
private home and a private /tmp writable; the interpreter the harness runs on read-only (so
`python` works); nothing else of the host — not the factory, the evidence, the snapshot store,
the warehouse or the harness's home — unless the trial mounts it (graders get the input
snapshot read-only). A new PID namespace: when the command's main process exits, the kernel kills
everything left in it (`setsid`, double forks), and `/proc` shows only the trial's processes, so
`/proc/$PPID/environ` is bubblewrap's init with the scrubbed environment, never the harness's.
`--die-with-parent` ends the namespace when the harness dies, even by `kill -9`. The network is
`none` (an empty network namespace: loopback only) or `model` (the host's network, shared).

`process`: a new session with a scrubbed environment, plus a marker variable every descendant
inherits, so the harness (and the next start after a crash) can find and kill descendants
that left the process group. A process that clears its own environment escapes the marker;
files, /proc and the network are not confined. The README lists what it does not guarantee.

Whatever runs in a trial goes through `workspace.process.run_command`, which reads the current
isolation from a context variable the trial runner sets around the agent, the prepare commands
and the graders — so a new call site cannot forget to sandbox.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench_pipeline.formats.model import AgentSpec
from bench_pipeline.formats.vocabulary import (
    ISOLATION_PROCESS,
    ISOLATION_SANDBOX,
    NETWORK_MODEL,
    NETWORK_NONE,
)

DEFAULT_BWRAP = "/usr/bin/bwrap"
# Every agent and grader process carries this variable: "<harness pid>:<harness start>:<token>".
# A process whose harness (pid + start time) is gone is an orphan of a crashed run.
MARKER_VAR = "BENCH_TRIAL_MARKER"
PROBE_TIMEOUT = 20


# What `isolation: process` does not guarantee (shown with the results and in the README); the
# keys are stable, the texts say it for a reader.
PROCESS_GAPS = {
    "files": "writes outside the workspace are not prevented",
    "harness_proc": "/proc shows the harness: its environment (secrets) and command line",
    "network": "network: none is not enforced; every agent has the host's network",
    "factory": "the factory, graders and evidence are readable by path",
    "env_cleared_descendants": "a descendant that clears its environment escapes cleanup",
}


class SandboxUnavailable(RuntimeError):
    """`isolation: sandbox` was asked for explicitly and bubblewrap cannot run here."""


@dataclass(frozen=True)
class Isolation:
    """How one trial's processes run. Paths are mounted at the same path inside the sandbox, so
    `{workspace}` and `{inputs}` mean the same thing on both sides."""

    mode: str  # ISOLATION_SANDBOX | ISOLATION_PROCESS
    network: str = NETWORK_NONE
    writable: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()  # the agent's own: its script, its `mounts:`
    shared: tuple[Path, ...] = ()  # read-only for agent and graders: the repo's git objects
    tmp: Path | None = None  # the private /tmp (the process mode points TMPDIR at it)
    marker: str = ""
    # Commands of the trial whose output went over the cap: {command, bytes, kept} (shared by
    # the agent's, the prepare and the graders' variants of one trial).
    truncated_outputs: list[dict[str, Any]] = field(default_factory=list, compare=False)
    sealed: tuple[Path, ...] = ()  # read-only inside a writable folder (bound after it)

    def for_graders(
        self,
        inputs: Path,
        writable: tuple[Path, ...] = (),
        readonly: tuple[Path, ...] = (),
        *,
        workspace: Path | None = None,
        home: Path | None = None,
        tmp: Path | None = None,
        agent_private: tuple[Path, ...] = (),
    ) -> Isolation:
        """Graders: the same workspace, the input snapshot read-only, never a network; plus
        the folders the grader writes its own results to (the tests runner's private folder)
        and what the task names for grading (a `tests.python` interpreter's environment).

        With `workspace`, `home` and `tmp` (a trial's grading): those writable instead of the
        agent's own home and scratch (`agent_private`) and /tmp, which carry over to its next
        attempt (code under test copied the hidden tests there; the agent's `mounts:` stay, as
        its factory declared them); and the workspace's `.git`, when a folder, read-only (what
        grading wrote inside it, the harness's snapshot of the workspace cannot see)."""
        if workspace is None:
            return replace(
                self,
                network=NETWORK_NONE,
                readonly=(inputs, *readonly),
                writable=(*self.writable, *writable),
            )
        own_git = workspace / ".git"
        sealed = (own_git,) if own_git.is_dir() and not own_git.is_symlink() else ()
        return replace(
            self,
            network=NETWORK_NONE,
            readonly=(inputs, *readonly),
            writable=(
                workspace,
                *(p for p in (home,) if p is not None),
                *(p for p in self.writable if p != workspace and p not in agent_private),
                *writable,
            ),
            sealed=sealed,
            tmp=tmp if tmp is not None else self.tmp,
        )

    def for_prepare(self, writable: tuple[Path, ...] = ()) -> Isolation:
        """Prepare commands are the suite's (trusted) set-up, e.g. installing dependencies: the
        workspace and the host network, nothing of the agent's; plus their cache."""
        return replace(
            self, network=NETWORK_MODEL, readonly=(), writable=(*self.writable, *writable)
        )


_current: contextvars.ContextVar[Isolation | None] = contextvars.ContextVar(
    "bench_isolation", default=None
)


@contextlib.contextmanager
def isolated(isolation: Isolation | None) -> Iterator[None]:
    """Every `run_command` in this block (this thread) runs under `isolation`."""
    token = _current.set(isolation)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Isolation | None:
    return _current.get()


# ---------------------------------------------------------------- availability


def bwrap_path() -> str:
    # BENCH_BWRAP points elsewhere only to exercise the fallback (a path that does not exist).
    return os.environ.get("BENCH_BWRAP") or DEFAULT_BWRAP


_probes: dict[str, tuple[bool, str]] = {}
_probe_lock = threading.Lock()


def sandbox_available() -> tuple[bool, str]:
    """(works, why not): bubblewrap runs a command with every namespace the sandbox uses."""
    exe = bwrap_path()
    with _probe_lock:
        if exe not in _probes:
            _probes[exe] = _probe(exe)
        return _probes[exe]


def _probe(exe: str) -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, "bubblewrap needs Linux"
    if not os.access(exe, os.X_OK):
        return False, f"{exe} not found (install the Debian package bubblewrap)"
    argv = [exe, *_namespace_args(NETWORK_NONE), *_system_args(), "--tmpfs", "/tmp", "--"]
    try:
        proc = subprocess.run(
            [*argv, "/usr/bin/true"], capture_output=True, text=True, timeout=PROBE_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{exe} failed: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return False, f"{exe} cannot create namespaces here: {last}"
    return True, ""


def resolve_mode(requested: str | None) -> tuple[str, str | None]:
    """The mode trials of an agent asking for `requested` (None = default) run with, and the
    one-line warning to show when the default had to fall back."""
    if requested == ISOLATION_PROCESS:
        return ISOLATION_PROCESS, None
    ok, why = sandbox_available()
    if ok:
        return ISOLATION_SANDBOX, None
    if requested == ISOLATION_SANDBOX:
        raise SandboxUnavailable(why)
    return ISOLATION_PROCESS, (
        f"warning: sandbox unavailable ({why}); trials run with isolation: process, which does "
        "not confine files, network or /proc (README: Isolation and integrity)"
    )


def default_network(*, runs_own_cli: bool, given_env: bool, preset: bool) -> str:
    """`model` for an agent that runs its own CLI and is given its API key (or is a preset);
    `none` for everything else: offline agents, agents whose model calls the harness makes,
    and graders."""
    return NETWORK_MODEL if preset or (runs_own_cli and given_env) else NETWORK_NONE


# ---------------------------------------------------------------- the bwrap command line


def _namespace_args(network: str) -> list[str]:
    args = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into a terminal the harness may hold
    ]
    if network != NETWORK_MODEL:
        args.append("--unshare-net")
    return args


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args + ["--dev", "/dev", "--proc", "/proc"]


def runtime_paths() -> list[Path]:
    """The interpreter the harness runs on (its venv and base install), which `python` in a
    command maps to: visible read-only so graders and Python agents run the same Python."""
    out: list[Path] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.realpath(sys.executable)):
        path = Path(p)
        try:
            if path.is_file():
                path = path.parent.parent
            visible = path.exists()
        except OSError:  # a folder on the way this user may not enter: nothing to mount
            continue
        if not str(path).startswith("/usr") and path not in out and visible:
            out.append(path)
    return out


def bwrap_options(isolation: Isolation, cwd: Path) -> list[str]:
    """bubblewrap's options for one command (order matters: /tmp first, binds under it later)."""
    args = [*_namespace_args(isolation.network), *_system_args()]
    if isolation.tmp is not None:
        args += ["--bind", str(isolation.tmp), "/tmp"]
    else:
        args += ["--tmpfs", "/tmp"]
    for path in runtime_paths():
        args += ["--ro-bind", str(path), str(path)]
    for path in (*isolation.shared, *isolation.readonly):
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for path in isolation.writable:
        if path.exists():
            args += ["--bind", str(path), str(path)]
    for path in isolation.sealed:
        if path.is_dir() and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    # The sandbox's own root (where bubblewrap made the mount points) read-only: nothing is
    # written outside the mounted folders, not even to memory.
    return [*args, "--remount-ro", "/", "--chdir", str(cwd)]


def wrap(argv: list[str], isolation: Isolation, cwd: Path) -> tuple[list[str], int]:
    """The command line that runs `argv` in the sandbox and the file descriptor holding the
    bubblewrap options (the caller passes it to the child and closes it). The options go
    through `--args FD`, not the command line, so `/proc/1/cmdline` inside the sandbox does not
    list the host paths that were mounted."""
    options = "\0".join(bwrap_options(isolation, cwd)) + "\0"
    fd = os.memfd_create("bwrap-args", 0)
    os.write(fd, options.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return [bwrap_path(), "--args", str(fd), "--", *argv], fd


# ---------------------------------------------------------------- finding descendants


_own_start: dict[int, str | None] = {}  # pid -> its start time: read once, not once a trial


def harness_marker(token: str) -> str:
    pid = os.getpid()  # keyed by pid: a forked child has its own start time
    if pid not in _own_start:
        _own_start[pid] = _start_time(pid)
    return f"{pid}:{_own_start[pid] or ''}:{token}"


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _markers() -> Iterator[tuple[int, str]]:
    """(pid, marker) of every live, non-zombie process carrying MARKER_VAR."""
    needle = f"{MARKER_VAR}=".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        at = data.find(needle)
        if at < 0 or (at > 0 and data[at - 1] != 0):
            continue
        value = data[at + len(needle) :].split(b"\0", 1)[0].decode(errors="replace")
        yield int(entry.name), value


def kill_marked(marker: str) -> list[int]:
    """SIGKILL every process whose marker is `marker` (a finished command's escaped children)."""
    killed = []
    for pid, value in _markers():
        if value == marker and pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def kill_orphans() -> list[int]:
    """SIGKILL every trial process whose harness (pid and start time in its marker) is gone:
    what a crashed `bench run` left behind, setsid'd and re-parented descendants included."""
    killed = []
    alive: dict[tuple[str, str], bool] = {}
    for pid, value in _markers():
        parts = value.split(":")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        key = (parts[0], parts[1])
        if key not in alive:
            alive[key] = _start_time(int(parts[0])) == parts[1] and _state(int(parts[0])) != "Z"
        if not alive[key]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


# ---------------------------------------------------------------- one trial's isolation


def trial_isolation(
    agent: AgentSpec,
    mode: str,
    *,
    workspace: Path | None,
    private: tuple[Path, ...],
    tmp: Path,
    token: str,
) -> Isolation:
    """The isolation of one trial's agent: `private` folders (home, scratch) and the workspace
    writable; the source repository's objects (the workspace borrows them) read-only; files the
    agent's own `command` names (its script) and its `mounts:` as declared."""
    network = agent.network or default_network(
        runs_own_cli=bool(agent.command or agent.preset),
        given_env=bool(agent.env),
        preset=bool(agent.preset),
    )
    writable = [*private]
    readonly: list[Path] = []
    shared: list[Path] = []
    if workspace is not None:
        writable.append(workspace)
        alternates = workspace / ".git" / "objects" / "info" / "alternates"
        if alternates.is_file():
            shared += [Path(ln) for ln in alternates.read_text().splitlines() if ln.strip()]
    for arg in agent.command:
        # Only files, never folders: the script of a factory-defined agent is visible, the
        # factory around it (its graders) is not.
        if os.path.isabs(arg) and os.path.isfile(arg):
            readonly.append(Path(arg))
    for mount in agent.mounts:
        if mount.endswith(":rw"):
            writable.append(Path(mount[:-3]))
        else:
            readonly.append(Path(mount))
    return Isolation(
        mode, network, tuple(writable), tuple(readonly), tuple(shared), tmp, harness_marker(token)
    )
