"""Start the servers the end-to-end tests need (dagster-webserver, redis, celery workers), each
in its own process group on 127.0.0.1, and stop the whole group afterwards.

A server started from a non-interactive shell can ignore SIGTERM, and killing only its parent
orphans the children (dagster dev ignores SIGTERM when started in the background): every server here gets its own session (setsid), and
`stop()` signals the group, escalating to SIGKILL. Output goes to a log file next to the test,
quoted in the error when a server dies or never answers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench_pipeline_tests.processes import group_members

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's scripts (dagster-webserver, celery)

# Bounded but generous: the webserver answers after 7-9 s on an idle 2-core machine.
WEBSERVER_START_TIMEOUT = 120.0
REDIS_START_TIMEOUT = 30.0
WORKER_START_TIMEOUT = 90.0
STOP_TIMEOUT = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    """The current environment, telemetry off, plus `extra`."""
    env = dict(os.environ)
    env["DAGSTER_DISABLE_TELEMETRY"] = "1"
    env.update(extra)
    return env


@dataclass
class Server:
    """A process group started by `start()`; `stop()` ends every process in it."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session: the leader's pid is the group id

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def fail(self, why: str) -> None:
        raise RuntimeError(f"{self.name}: {why}\n--- {self.log_path} (tail) ---\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM to the group, then SIGKILL to what is left; never raises."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break  # nothing left in the group
            except PermissionError:
                break
            if _wait_group_gone(self.pgid, timeout):
                break
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass


def _wait_group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Reap our own child so a zombie leader does not linger; zombies count as gone.
        try:
            os.waitpid(pgid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not group_members(pgid):
            return True
        time.sleep(0.2)
    return False


def start(
    name: str,
    argv: Sequence[str],
    *,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Server:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    log = log_path.open("wb")
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,  # setsid: its own process group
        )
    finally:
        log.close()  # the child holds its own descriptor
    return Server(name, proc, log_path)


def wait_until(server: Server, ready: callable, timeout: float, what: str) -> None:  # type: ignore[valid-type]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            server.fail(f"exited with code {server.proc.returncode} before {what}")
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.5)
    server.fail(f"no {what} within {timeout:.0f} s")


@contextmanager
def stopping(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- dagster-webserver


def http_get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - 127.0.0.1 only
        return resp.read()


def graphql(base_url: str, query: str, variables: dict | None = None, timeout: float = 60.0):
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    req = urllib.request.Request(
        f"{base_url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - 127.0.0.1 only
        payload = json.loads(resp.read())
    if payload.get("errors"):
        raise AssertionError(f"GraphQL errors: {payload['errors']}")
    return payload["data"]


def start_webserver(
    *,
    dagster_home: Path,
    bench_home: Path,
    log_dir: Path,
    workspace: Path = ROOT / "workspace.yaml",
    timeout: float = WEBSERVER_START_TIMEOUT,
) -> Server:
    """dagster-webserver on a free 127.0.0.1 port, answering /server_info when this returns."""
    port = free_port()
    env = server_env(DAGSTER_HOME=str(dagster_home), BENCH_HOME=str(bench_home))
    exe = BIN / "dagster-webserver"
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "dagster_webserver"]
    argv += ["-w", str(workspace), "-h", HOST, "-p", str(port)]
    server = start("dagster-webserver", argv, log_dir=log_dir, env=env, cwd=ROOT)
    server.url = f"http://{HOST}:{port}"
    try:
        wait_until(
            server,
            lambda: json.loads(http_get(f"{server.url}/server_info", timeout=5)),
            timeout,
            "answer on /server_info",
        )
    except BaseException:
        server.stop()
        raise
    return server


def wait_for_code_location(server: Server, timeout: float = WEBSERVER_START_TIMEOUT) -> None:
    """The webserver answers before its code location is loaded; wait for the location."""
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
    query += "locationOrLoadError { __typename ... on PythonError { message } } } } } }"

    def loaded() -> bool:
        entries = graphql(server.url, query)["workspaceOrError"]["locationEntries"]
        for entry in entries:
            err = entry["locationOrLoadError"] or {}
            if err.get("__typename") == "PythonError":
                raise AssertionError(f"code location failed to load: {err.get('message')}")
        return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)

    deadline = time.monotonic() + timeout
    while True:
        try:
            if loaded():
                return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            server.fail(f"code location not loaded within {timeout:.0f} s")
        time.sleep(0.5)


# --------------------------------------------------------------------------- redis, celery


def redis_available() -> str | None:
    return shutil.which("redis-server")


def _redis_ping(port: int) -> bool:
    with socket.create_connection((HOST, port), timeout=2) as s:
        s.sendall(b"PING\r\n")
        return s.recv(64).startswith(b"+PONG")


def start_redis(*, log_dir: Path, timeout: float = REDIS_START_TIMEOUT) -> Server:
    """A throwaway redis-server on a free port: loopback only, no persistence."""
    exe = redis_available()
    if not exe:
        raise RuntimeError("redis-server is not installed (make system-deps)")
    port = free_port()
    argv = [
        exe,
        "--port",
        str(port),
        "--bind",
        HOST,
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "yes",
        "--dir",
        str(log_dir),
    ]
    server = start("redis", argv, log_dir=log_dir)
    server.url = f"redis://{HOST}:{port}/0"
    server.extra["port"] = port
    try:
        wait_until(server, lambda: _redis_ping(port), timeout, "PONG")
    except BaseException:
        server.stop()
        raise
    return server


def _celery_script_dirs() -> list[str]:
    """Where the `celery` script is: the venv's scripts, or a `pip install --target` dir's bin."""
    dirs = [str(BIN)]
    try:
        import celery

        target_bin = Path(celery.__file__).resolve().parents[1] / "bin"
        if (target_bin / "celery").exists():
            dirs.append(str(target_bin))
    except ImportError:
        pass
    return dirs


def start_celery_worker(
    name: str,
    *,
    config_yaml: Path,
    env: Mapping[str, str],
    log_dir: Path,
    cwd: Path,
    concurrency: int = 1,
) -> Server:
    """`dagster-celery worker start` (its documented CLI) in its own group; the worker is ready
    when it logs `ready.`. It spawns `celery` from PATH, so the venv's scripts go first."""
    run_env = dict(env)
    run_env["PATH"] = os.pathsep.join([*_celery_script_dirs(), run_env.get("PATH", "")])
    argv = [
        sys.executable,
        "-m",
        "dagster_celery.cli",
        "worker",
        "start",
        "-A",
        "dagster_celery.app",
        "-y",
        str(config_yaml),
        "-n",
        name,
        "--loglevel",
        "INFO",
        "--",
        f"--concurrency={concurrency}",
        "--without-gossip",
        "--without-mingle",
    ]
    server = start(f"celery-{name}", argv, log_dir=log_dir, env=run_env, cwd=cwd)
    try:
        wait_until(
            server, lambda: " ready." in server.log_tail(100_000), WORKER_START_TIMEOUT, "ready"
        )
    except BaseException:
        server.stop()
        raise
    return server
