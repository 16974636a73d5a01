"""`bench serve`: a warm process that runs bench commands, so that none pays the start-up.

Before a `bench run` does anything it spends ~1.5 s importing Dagster, pandas and pyarrow
(perf/startup.py); a one-trial run's own work is a fraction of that. `bench serve` imports
them once, resolves the code location's jobs, and waits on a Unix socket in the bench home
(`<home>/serve.sock`). While it runs, any `bench` command with the same home (except `serve`
and `ui`) hands itself over (`bench_pipeline.cli.handoff`): the server forks a child, a copy
of the warm process that shares no state with other commands, which takes the command's
arguments, environment, working folder, umask and its stdin/stdout/stderr (the descriptors
themselves, passed over the socket), runs it exactly as `bench` would, and sends back its
exit code.

- Signals: Ctrl-C, SIGTERM, SIGHUP and SIGQUIT sent to the command are forwarded to the child.
  If the command's process disappears (kill -9), the child is interrupted as by Ctrl-C.
- Staleness: the request carries a fingerprint of the code the command would run (the
  interpreter, the package folder with every module's size and mtime, the installed
  packages' folders). A server with another fingerprint (an upgrade, an edited checkout,
  another venv) is not used: the command runs in its own process and the server exits.
- Safety: the socket is created private (0600) and the server serves only its own user
  (SO_PEERCRED).
- `BENCH_NO_SERVE=1` runs a command in its own process whatever runs.
- Started on its own: at a terminal, a command that finds no server starts one for the next
  (`handoff.start_server`: `--idle-timeout 900`, output in `<home>/serve.log`); scripts and CI
  only with `BENCH_AUTO_SERVE=1`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_pipeline.cli import collector, common
from bench_pipeline.cli.handoff import (
    LOCK_NAME,
    NO_SERVE_ENV,
    START_TIMEOUT,
    address_of,
    connect,
    fingerprint,
    peer_uid,
    python_settings,
    receive,
    seconds,
    send,
    socket_path,
    try_lock,
)
from bench_pipeline.runs.paths import BenchPaths

# --------------------------------------------------------------------------- the server's side


def warm_up(paths: BenchPaths) -> None:
    """Import what commands need, resolve the code location's jobs and open the home's
    Dagster instance, once, before any fork.

    Nothing here may start a thread: a fork copies only the forking thread, so a lock another
    thread held would stay held in every child."""
    import importlib
    import pkgutil

    from bench_pipeline.defs.launcher import prepare_instance, prepare_jobs

    # What a command would otherwise import after the fork, in every child again: each
    # package a run, a rescore or an analysis goes through, whole (so a module added later is
    # warm too), and the third-party modules they import only when called. Measured: a served
    # one-trial run imported 55 modules of its own before this (sys.modules after the command
    # against before it), none after.
    for name in WARM_MODULES:
        # (private modules of Dagster and pandas among them: one that a later version moved
        # is only a cold import in each command, never a server that does not start)
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(name)
    for name in WARM_PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(module.name)
    prepare_jobs()
    prepare_instance(paths)


# The packages a command's work goes through (not `agents`: an agent's SDK is imported by the
# run that uses it, and its own time dwarfs the import).
WARM_PACKAGES = (
    "bench_pipeline.cli",
    "bench_pipeline.formats",
    "bench_pipeline.results",
    "bench_pipeline.runs",
    "bench_pipeline.scorers",
    "bench_pipeline.trials",
    "bench_pipeline.warehouse",
    "bench_pipeline.workspace",
)
# Imported by those packages, or by Dagster's execution of a run, only when first used.
WARM_MODULES = (
    "pandas",
    "pandas.core.methods.to_dict",
    "pyarrow.dataset",
    "pyarrow.pandas_compat",
    "pyarrow.parquet",
    "scipy.stats",
    "dagster._core.execution.plan.active",
    "dagster._core.executor.in_process",
    "dagster._core.instance.runs.run_domain",
    "dagster._core.system_config.composite_descent",
    "dagster._core.storage.local_compute_log_manager",
    "http.client",
    "urllib.request",
)


def cmd_serve(args: argparse.Namespace) -> int:
    """Keep a warm process that runs this home's bench commands without start-up cost."""
    paths = common.paths_of(args)
    paths.home.mkdir(parents=True, exist_ok=True)
    path = socket_path(paths.home)
    if args.stop:
        return _stop(path)
    # Held while the server lives: a second `bench serve` of the home, even one started during
    # this one's warm-up, refuses instead of taking over (and later removing) the socket.
    lock = try_lock(paths.home / LOCK_NAME)
    if lock is None or _answers(path):
        raise common.CliError(f"a server already runs on {path}; stop it with `bench serve --stop`")
    started = time.perf_counter()
    print(f"bench serve: pid {os.getpid()} warming up for {path}", file=sys.stderr, flush=True)
    # (paused here too: a server a command auto-started runs `python -m`, not the console script)
    collector.pause()
    warm_up(paths)
    collector.resume()  # before any fork: no child scans (and so copies) the warm objects
    threads = threading.active_count()
    if threads != 1:  # a fault of this code, not of the user's input
        print(f"error: bench serve: {threads} threads after warm-up; not forking", file=sys.stderr)
        return common.EXIT_FAILED
    mine = {"fingerprint": fingerprint(), "python": python_settings()}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.unlink()  # left by a server that died (_answers said no one listens)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise common.CliError(f"cannot replace {path}: {exc.strerror}") from None
    old_mask = os.umask(0o177)
    try:
        with address_of(path) as address:
            listener.bind(address)
    finally:
        os.umask(old_mask)
    listener.listen(16)
    listener.settimeout(0.5)
    stop = threading.Event()

    def finish(_signum: int, _frame: object) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, finish)
    print(
        f"bench serve: ready on {path} (pid {os.getpid()}, warm in "
        f"{time.perf_counter() - started:.1f} s); stop with Ctrl-C or `bench serve --stop`",
        file=sys.stderr,
        flush=True,
    )
    children: dict[int, socket.socket] = {}
    idle = args.idle_timeout
    last_busy = time.monotonic()
    try:
        while not stop.is_set():
            _reap(children)
            if children:
                last_busy = time.monotonic()
            elif idle is not None and time.monotonic() - last_busy >= idle:
                print(
                    f"bench serve: no command for {idle:g} s; stopping", file=sys.stderr, flush=True
                )
                break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except InterruptedError:  # pragma: no cover
                continue
            last_busy = time.monotonic()
            try:
                if _serve_one(conn, [listener, lock], mine, children, stop, args.run_command):
                    continue
            except (OSError, ValueError) as exc:
                print(f"bench serve: a request failed: {exc}", file=sys.stderr, flush=True)
            conn.close()
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        # Commands still running finish on their own: they are not the server's to stop.
        for conn in children.values():
            conn.close()
        lock.close()
    print("bench serve: stopped", file=sys.stderr, flush=True)
    return common.EXIT_OK


def _answers(path: Path) -> bool:
    sock = connect(path)
    if sock is None:
        return False
    sock.close()
    return True


def _stop(path: Path) -> int:
    sock = connect(path)
    if sock is None:
        print(f"no server runs on {path}", file=sys.stderr)
        return common.EXIT_OK
    with sock:
        send(sock, {"stop": True})
        receive(sock)
    print(f"stopped the server on {path}", file=sys.stderr)
    return common.EXIT_OK


def _serve_one(
    conn: socket.socket,
    servers: list[Any],
    mine: dict[str, Any],
    children: dict[int, socket.socket],
    stop: threading.Event,
    run_command: Callable[[list[str]], int],
) -> bool:
    """Answer one connection; True when a child now owns it. `servers`: what a child must
    not keep of the server (its listener, its lock)."""
    conn.settimeout(30)
    if peer_uid(conn) != os.getuid():
        print("bench serve: refused a connection from another user", file=sys.stderr, flush=True)
        return False
    request, fds = receive(conn, max_fds=3)
    try:
        if request is None:
            return False
        if request.get("stop"):
            stop.set()
            send(conn, {"stopped": True})
            return False
        if request.get("fingerprint") != mine["fingerprint"]:
            print(
                "bench serve: a command runs other code than this server (upgraded or edited): "
                "it ran in its own process; this server stops, start it again with `bench serve`",
                file=sys.stderr,
                flush=True,
            )
            stop.set()
            send(conn, {"stale": True})
            return False
        if request.get("python") != mine["python"]:
            # Another module path or interpreter settings (PYTHONPATH, -X, PYTHONWARNINGS...): a
            # served command would keep the server's, so it runs on its own; the server stays.
            send(conn, {"elsewhere": True})
            return False
        if len(fds) != 3:
            raise ValueError("a request without its three standard streams")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            for own in servers:
                own.close()  # the child serves its one command, never other connections
            for other in children.values():
                other.close()  # other commands' connections are the server's
            _run_child(conn, request, fds, run_command)  # never returns
        children[pid] = conn
        print(f"bench serve: pid {pid} runs bench {' '.join(request['argv'])}", file=sys.stderr)
        return True
    finally:
        for fd in fds:
            os.close(fd)


def _reap(children: dict[int, socket.socket]) -> None:
    """Collect finished children; one that died without sending its exit code (killed) gets
    it sent for it, as a shell reports a killed command: 128 + the signal."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        if os.WIFSIGNALED(status):
            with contextlib.suppress(OSError):
                send(conn, {"exit": 128 + os.WTERMSIG(status)})
        conn.close()


def _run_child(
    conn: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    run_command: Callable[[list[str]], int],
) -> None:
    code = common.EXIT_FAILED
    try:
        os.setpgid(0, 0)  # the server's signals are not the command's, nor the other way round
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        # Started only on the caller's go: one that gave up waiting (it then runs the command
        # itself) must never see it run twice, nor a traceback of a reply it no longer reads.
        try:
            conn.settimeout(START_TIMEOUT)
            send(conn, {"pid": os.getpid()})
            go, _ = receive(conn)
        except (OSError, ValueError):
            go = None
        if not go or not go.get("go"):
            os._exit(0)
        conn.settimeout(None)
        # The command's streams, buffered as its own process would buffer them.
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=_buffering(1))  # noqa: SIM115
        sys.stderr = open(
            2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1
        )  # noqa: SIM115
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[NO_SERVE_ENV] = "1"
        sys.argv = ["bench", *request["argv"]]
        finished = threading.Event()
        threading.Thread(target=_relay_signals, args=(conn, finished), daemon=True).start()
        try:
            code = run_command(request["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        finished.set()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is over: nothing to interrupt
        with contextlib.suppress(OSError):
            send(conn, {"exit": code})
    except BaseException:  # noqa: BLE001 - a child must never fall back into the server's loop
        import traceback

        traceback.print_exc()
        with contextlib.suppress(OSError):
            send(conn, {"exit": common.EXIT_FAILED})
    finally:
        os._exit(code if isinstance(code, int) else 1)


def _buffering(fd: int) -> int:
    return 1 if os.isatty(fd) else -1


def _relay_signals(conn: socket.socket, finished: threading.Event) -> None:
    """The command's signals, as its process received them; its end gone = Ctrl-C."""
    while True:
        try:
            message, _ = receive(conn)
        except (OSError, ValueError):
            message = None
        if message is None:
            if not finished.is_set():
                os.kill(os.getpid(), signal.SIGINT)
            return
        if "signal" in message:
            os.kill(os.getpid(), int(message["signal"]))


def register(add: common.AddCommand) -> None:
    s = add("serve", cmd_serve)
    s.add_argument("--stop", action="store_true", help="stop the server of this home")
    s.add_argument(
        "--idle-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="stop after this long with no command running or asked for (default: never)",
    )


def _seconds(text: str) -> float:
    value = seconds(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value
