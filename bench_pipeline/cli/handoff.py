"""The `bench` entry point's first step: hand the command to a running `bench serve`.

Kept to the standard library, so that a served command costs its process ~0.04 s (the
command modules, argparse and their imports are the server's). What `bench serve` is, and
what a served command keeps of its own process, is in `bench_pipeline.cli.serve`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SOCKET_NAME = "serve.sock"
# Commands that never go to the server: the server itself, and `ui`, which execs `dagster dev`.
LOCAL_COMMANDS = frozenset({"serve", "ui"})
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_HEADER = struct.Struct("!I")
_MAX_REQUEST = 16 * 1024 * 1024
# How long a command waits for the server to start it: a server that accepts and never answers
# (stopped with Ctrl-Z, stuck) must not hang every command of its home.
START_TIMEOUT = 30.0
# Set in a served command's environment: a `bench` it starts (a script, a test) runs on its own.
NO_SERVE_ENV = "BENCH_NO_SERVE"
# Whether a command that finds no server starts one for the next: "1" always, "0" never,
# unset only at a terminal (stderr a tty) and never under CI (`CI` set).
AUTO_SERVE_ENV = "BENCH_AUTO_SERVE"
# How long a server started that way waits for the next command (seconds, default below).
IDLE_ENV = "BENCH_SERVE_IDLE"
AUTO_IDLE_SECONDS = 900.0
LOG_NAME = "serve.log"
LOCK_NAME = "serve.lock"


# --------------------------------------------------------------------------- shared


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


def fingerprint() -> str:
    """What decides which code a command runs: a server with another one must not run it."""
    import bench_pipeline

    package = Path(bench_pipeline.__file__).resolve().parent
    digest = hashlib.sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0{package}\0".encode())
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):  # modules, and data files a module may read at import
            try:
                st = os.stat(os.path.join(folder, name))
            except OSError:  # an editor's dangling lock link, a file gone since the listing
                continue
            digest.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    # An install or upgrade adds or renames entries of site-packages: its folders' mtimes move.
    for entry in sys.path:
        if os.path.basename(entry) not in ("site-packages", "dist-packages"):
            continue  # sys.path[0] is the script's folder, which differs between callers
        with contextlib.suppress(OSError):
            digest.update(f"{entry}\0{os.stat(entry or '.').st_mtime_ns}\0".encode())
    return digest.hexdigest()


def python_settings() -> dict[str, Any]:
    """What else decides how this interpreter runs code beyond the package: its module path
    (PYTHONPATH), its flags and PYTHON* variables (warnings, I/O encoding, hash seed). A served
    command keeps the server's, so it goes only to a server whose settings are the same."""
    return {
        "path": sys.path[1:],  # sys.path[0] is the script's folder, which differs between callers
        "flags": repr(sys.flags),
        "xoptions": sorted(f"{k}={v}" for k, v in sys._xoptions.items()),
        "env": sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("PYTHON")),
    }


@contextlib.contextmanager
def address_of(path: Path) -> Iterator[str]:
    """A name for `path` that fits a Unix socket address (108 bytes): through the folder's
    descriptor when the path is longer."""
    if len(os.fsencode(str(path))) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def connect(path: Path) -> socket.socket | None:
    """A connection to this user's server listening on `path`; None when none answers there.
    A listener of another user is never talked to: a command sends its environment (API keys)
    and its terminal to the server."""
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with address_of(path) as address:
            sock.connect(address)
        owner = peer_uid(sock)
    except OSError:
        sock.close()
        return None
    if owner != os.getuid():
        sock.close()
        print(
            f"bench: not using {path}: it is served by another user (uid {owner})",
            file=sys.stderr,
        )
        return None
    return sock


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (as the kernel says)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [payload], fds)
        sock.sendall(payload[sent:])
    else:
        sock.sendall(payload)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (None at end of stream) and the descriptors that came with it. Reads
    exactly one message's bytes: the next (two can arrive together) stays in the socket. A
    message that cannot be read closes the descriptors it brought."""
    fds: list[int] = []
    try:
        header = b""
        while len(header) < _HEADER.size:
            want = _HEADER.size - len(header)
            if max_fds and not fds:
                chunk, got, _flags, _addr = socket.recv_fds(sock, want, max_fds)
                fds = list(got)
            else:
                chunk = sock.recv(want)
            if not chunk:
                return None, fds
            header += chunk
        (size,) = _HEADER.unpack(header)
        if size > _MAX_REQUEST:
            raise ValueError(f"message of {size} bytes")
        body = b""
        while len(body) < size:
            chunk = sock.recv(size - len(body))
            if not chunk:
                return None, fds
            body += chunk
        return json.loads(body), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


# --------------------------------------------------------------------------- the command's side


def home_and_command(argv: list[str]) -> tuple[Path, str | None]:
    """The bench home and the command `argv` names, read as `bench`'s parser would (its
    global options are `--home X` and `--warehouse X`); None for no command or a help request."""
    home: str | None = None
    command: str | None = None
    rest = iter(argv)
    for arg in rest:
        if arg in ("-h", "--help"):
            return _default_home(None), None
        if arg == "--home":
            home = next(rest, None)
        elif arg.startswith("--home="):
            home = arg.split("=", 1)[1]
        elif arg == "--warehouse":
            next(rest, None)
        elif not arg.startswith("-") and command is None:
            command = arg
            if any(a in ("-h", "--help") for a in rest):
                return _default_home(home), None
            break
    return _default_home(home), command


def _default_home(home: str | None) -> Path:
    # As runs.paths.default_home and cli.common.paths_of (not imported: they are not light).
    return Path(home or os.environ.get("BENCH_HOME") or Path.cwd() / ".bench").absolute()


def hand_off(argv: list[str]) -> int | None:
    """Run this command in the home's server: its exit code; None when there is no server to
    use (then the command runs in this process)."""
    home, command = home_and_command(argv)
    if command is None or command in LOCAL_COMMANDS or os.environ.get(NO_SERVE_ENV):
        return None
    sock = connect(socket_path(home))
    if sock is None:  # no server, or a server that died left its socket: run here
        if auto_serve_wanted(os.environ):
            start_server(home)
        return None
    with sock:
        try:
            cwd = os.getcwd()
        except OSError:  # the working folder was removed: let the command say so itself
            return None
        request = {
            "argv": argv,
            "env": dict(os.environ),
            "cwd": cwd,
            "umask": _umask(),
            "fingerprint": fingerprint(),
            "python": python_settings(),
        }
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            send(sock, request, [0, 1, 2])
            sock.settimeout(START_TIMEOUT)
            reply, _ = receive(sock)
            if reply is None or "pid" not in reply:
                return None  # stale, other settings, refused: the command runs here
            send(sock, {"go": True})  # only now does the server's child start the command
            sock.settimeout(None)
        except TimeoutError:
            print(
                f"bench: the server on {socket_path(home)} did not answer in "
                f"{START_TIMEOUT:.0f} s; the command runs here",
                file=sys.stderr,
            )
            return None
        except (OSError, ValueError):
            return None
        except KeyboardInterrupt:  # before the command started: nothing ran, nothing to resume
            print("interrupted", file=sys.stderr)
            return 130
        return _wait_for_exit(sock, int(reply["pid"]))


def auto_serve_wanted(env: Mapping[str, str]) -> bool:
    """Whether a command that finds no server should start one for the commands after it:
    a person at a terminal runs the next command soon; a script, a cron job or CI may not
    (they ask with BENCH_AUTO_SERVE=1)."""
    choice = env.get(AUTO_SERVE_ENV, "").strip()
    if choice in ("0", "1"):
        return choice == "1"
    return not env.get("CI") and os.isatty(2)


def start_server(home: Path) -> int | None:
    """Start `bench serve --idle-timeout` for `home` in the background, its output in
    `<home>/serve.log`, and say so on stderr: the pid, or None when none was started (no home
    folder yet: a command must not leave a folder behind just for this; a server already
    warming up; a bad BENCH_SERVE_IDLE). This command still runs in its own process: the
    server's warm-up is not waited for."""
    import subprocess

    if not home.is_dir():
        return None
    idle_text = os.environ.get(IDLE_ENV, "").strip()
    idle = seconds(idle_text) if idle_text else AUTO_IDLE_SECONDS
    if idle is None:
        print(
            f"bench: {IDLE_ENV}={idle_text!r} is not a number of seconds above 0; "
            "no server started (unset it for the default, 900)",
            file=sys.stderr,
        )
        return None
    if _locked(home / LOCK_NAME):  # a server holds it from its warm-up on
        return None
    env = {k: v for k, v in os.environ.items() if k not in (NO_SERVE_ENV, AUTO_SERVE_ENV)}
    argv = [
        sys.executable,
        # the command's interpreter settings, which a served command must share with it
        *subprocess._args_from_interpreter_flags(),  # noqa: SLF001 (the stdlib's own helper)
        "-c",
        server_entry(),
        "--home",
        str(home),
        "serve",
        "--idle-timeout",
        f"{idle:g}",
    ]
    try:
        with open(home / LOG_NAME, "ab") as log:
            server = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,  # (and this folder: a relative PYTHONPATH means the same there)
                start_new_session=True,  # not the terminal's: Ctrl-C here does not reach it
            )
    except OSError as exc:
        print(f"bench: could not start a server for {home}: {exc}", file=sys.stderr)
        return None
    if os.isatty(2):
        print(
            f"bench: started a warm server for {home} (pid {server.pid}) so that the next "
            f"commands skip their start-up; it stops after {idle:g} s without one "
            f"(`bench serve --stop` now; {AUTO_SERVE_ENV}=0 turns this off)",
            file=sys.stderr,
        )
    return server.pid


def server_entry() -> str:
    """The code a started server runs (`python -c`): `bench_pipeline.cli.main`, imported from
    the folder this command's package came from, never from the working folder.

    `python -m` and `-c` put the working folder first on sys.path, and the server starts in
    the command's folder (a relative PYTHONPATH means the same there): a project's own
    `random.py` or `types.py` would shadow the standard library's in the server, run the
    project's code at its warm-up and kill it, and every command would start another. The
    console script has its own folder there instead; so does this. Under -P or -I nothing
    was put first, and nothing is."""
    import bench_pipeline

    root = os.path.dirname(os.path.dirname(os.path.abspath(bench_pipeline.__file__)))
    return (
        "import sys\n"
        f"if not sys.flags.safe_path: sys.path[0] = {root!r}\n"
        "from bench_pipeline.cli.main import main\n"
        "sys.exit(main())\n"
    )


def seconds(text: str) -> float | None:
    """`text` as a finite number of seconds above 0 (`bench serve --idle-timeout`,
    BENCH_SERVE_IDLE), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None


def try_lock(path: Path) -> Any:
    """`path` opened and exclusively locked (flock), or None when another process holds it
    (`bench serve` holds its home's from its warm-up on)."""
    import fcntl

    handle = path.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _locked(path: Path) -> bool:
    try:
        handle = try_lock(path)
    except OSError:  # (an unwritable home: the server would say why in its log)
        return False
    if handle is None:
        return True
    handle.close()  # (closing releases the lock)
    return False


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _wait_for_exit(sock: socket.socket, child: int) -> int:
    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            send(sock, {"signal": signum})

    previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS}
    try:
        while True:
            try:
                message, _ = receive(sock)
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
            if message is None:
                print(
                    f"error: bench serve: the command's process {child} vanished", file=sys.stderr
                )
                return 1
            if "exit" in message:
                return int(message["exit"])
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
