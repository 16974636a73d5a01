"""`bench serve`: a warm process runs a home's commands. A served command is the same command
(output, exit code, errors, working folder, the Dagster run it records) without its own process
importing anything heavy; a server running other code is never used; the command's signals
reach the served child, and a command killed with SIGKILL does not leave its run going."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.processes import wait_until_dead

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(sys.executable).parent / "bench"
# A `bench` process that reports which heavy libraries it imported itself.
CLIENT = (
    "import json, sys\n"
    "from bench_pipeline.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "heavy = [m for m in ('dagster', 'pandas', 'pyarrow') if m in sys.modules]\n"
    "print('HEAVY ' + json.dumps(heavy), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _env(home: Path, pythonpath: Path | str = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BENCH_NO_SERVE"}
    env.update(
        PYTHONPATH=str(pythonpath),
        BENCH_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster_home"),
    )
    return env


def _wait_for(predicate, what: str, seconds: float = 180) -> None:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Server:
    def __init__(
        self,
        home: Path,
        log: Path,
        env: dict[str, str] | None = None,
        entry: tuple[str, ...] = (str(BENCH),),
    ):
        self.home, self.log = home, log
        self.proc = subprocess.Popen(
            [*entry, "serve"],
            env=env or _env(home),
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
            start_new_session=True,
        )
        _wait_for(lambda: "ready on" in self.text() or self.proc.poll() is not None, "the server")
        assert self.proc.poll() is None, self.text()

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def served_pids(self) -> list[int]:
        return [int(p) for p in re.findall(r"pid (\d+) runs bench", self.text())]

    def stop(self) -> None:
        if self.proc.poll() is None:
            subprocess.run([str(BENCH), "serve", "--stop"], env=_env(self.home), timeout=120)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(bench_home: Path, tmp_path: Path) -> Iterator[Server]:
    running = Server(bench_home, tmp_path / "serve.log")
    try:
        yield running
    finally:
        running.stop()


def _client(
    args: list[str],
    home: Path,
    cwd: Path,
    pythonpath: Path | str = ROOT,
    extra: dict[str, str] | None = None,
) -> tuple[int, str, str, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, *args],
        env={**_env(home, pythonpath), **(extra or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    heavy = json.loads(out.stderr.rsplit("HEAVY ", 1)[1])
    return out.returncode, out.stdout, out.stderr, heavy


def test_a_served_command_is_the_same_command_without_its_own_start_up(
    factory: Path, bench_home: Path, server: Server
) -> None:
    # A relative launch path: the served command resolves it from the caller's folder.
    cwd = factory.parent
    launch = str((factory / "launches" / "demo.yaml").relative_to(cwd))
    code, out, err, heavy = _client(
        ["run", launch, "--max", "1", "--repeats", "1", "--json"], bench_home, cwd
    )
    assert code == 0, err
    assert heavy == []  # the caller imported nothing heavy: the server's child ran the command
    result = json.loads(out)
    run_id = result["run"]["run_id"]
    assert len(result["config_table"]) == 3 and re.search(rf"run {run_id}: 3 trials", err)
    (pid,) = server.served_pids()
    assert pid != os.getpid()

    # The Dagster run it recorded, seen by a command that runs on its own.
    code, out, err = run_bench("results", "--list", "--json", home=bench_home)
    assert code == 0, err
    assert run_id in out

    # Bad input: the same one line and exit code 2, on the caller's stderr.
    code, out, err, heavy = _client(["run", "missing.yaml"], bench_home, cwd)
    assert code == 2 and heavy == []
    assert err.splitlines()[0].startswith(f"error: {cwd / 'missing.yaml'}: ")
    # A command that prints and exits 0 without the server importing anything for it.
    code, out, err, heavy = _client(["results", "--list"], bench_home, cwd)
    assert code == 0 and run_id in out and heavy == []
    assert len(server.served_pids()) == 3
    assert "Traceback" not in server.text()


# On a module path before the checkout: every fork of the process records, in the child, whether
# the garbage collector is on and how many objects are frozen.
_RECORD_FORKS = """
import gc, os
def _record():
    with open(os.environ["BENCH_TEST_FORKS"], "a") as out:
        out.write(f"{os.getpid()} {int(gc.isenabled())} {gc.get_freeze_count()}\\n")
os.register_at_fork(after_in_child=_record)
"""


@pytest.mark.parametrize(
    "entry",
    [(str(BENCH),), (sys.executable, "-m", "bench_pipeline.cli.main")],
    ids=["console-script", "auto-started"],  # (a command starts its server with `python -m`)
)
def test_the_server_freezes_its_warm_objects_before_it_forks_a_command(
    factory: Path, bench_home: Path, tmp_path: Path, entry: tuple[str, ...]
) -> None:
    """`bench serve` imports with the garbage collector off and freezes what it imported
    before it forks (bench_pipeline/cli/collector.py): the child that runs a command collects
    its own garbage and never scans (nor copies) the server's warm objects."""
    watch = tmp_path / "watch"
    watch.mkdir()
    (watch / "sitecustomize.py").write_text(_RECORD_FORKS)
    forks = tmp_path / "forks.txt"
    pythonpath = f"{watch}{os.pathsep}{ROOT}"
    env = {**_env(bench_home, pythonpath), "BENCH_TEST_FORKS": str(forks)}
    server = Server(bench_home, tmp_path / "serve.log", env, entry)
    try:
        launch = str(factory / "launches" / "demo.yaml")
        code, _out, err, heavy = _client(
            ["run", launch, "--max", "1", "--repeats", "1"], bench_home, tmp_path, pythonpath
        )
        assert code == 0, err
        assert heavy == []  # (served: the caller imported nothing heavy)
        (pid,) = server.served_pids()
    finally:
        server.stop()
    children = {int(p): (on, int(n)) for p, on, n in map(str.split, forks.read_text().splitlines())}
    enabled, frozen = children[pid]
    assert enabled == "1" and frozen > 100_000, children[pid]


def test_a_server_running_other_code_is_not_used_and_stops(
    factory: Path, bench_home: Path, server: Server, tmp_path: Path
) -> None:
    # The same package in another folder (an edited checkout, an upgrade): other code.
    other = tmp_path / "other"
    shutil.copytree(ROOT / "bench_pipeline", other / "bench_pipeline")
    shutil.copy(ROOT / "workspace.yaml", other / "workspace.yaml")
    launch = factory / "launches" / "demo.yaml"
    code, out, err, heavy = _client(
        ["run", str(launch), "--max", "1", "--repeats", "1", "--json"], bench_home, tmp_path, other
    )
    assert code == 0, err
    assert "dagster" in heavy  # it ran in its own process, on its own code
    assert server.served_pids() == []
    _wait_for(lambda: server.proc.poll() is not None, "the stale server to stop")
    assert "other code" in server.text()
    assert not (bench_home / "serve.sock").exists()


def test_other_python_settings_run_on_their_own_and_a_second_server_is_refused(
    bench_home: Path, server: Server, tmp_path: Path
) -> None:
    # Another module path (PYTHONPATH): a served command would keep the server's sys.path.
    extra = tmp_path / "extra"
    extra.mkdir()
    code, out, err, heavy = _client(
        ["results", "--list"], bench_home, tmp_path, f"{ROOT}{os.pathsep}{extra}"
    )
    assert code == 0, err
    assert server.served_pids() == [] and heavy != []  # it ran in its own process
    code, out, err, heavy = _client(["results", "--list"], bench_home, tmp_path)
    assert code == 0 and heavy == [] and len(server.served_pids()) == 1  # the server stayed
    # A second server of the home refuses at once, and the first keeps its socket.
    second = subprocess.run(
        [str(BENCH), "serve"], env=_env(bench_home), capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 2 and "a server already runs" in second.stderr
    code, out, err, heavy = _client(["results", "--list"], bench_home, tmp_path)
    assert code == 0 and heavy == [] and len(server.served_pids()) == 2


def _auto_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in _env(home).items() if k not in ("BENCH_AUTO_SERVE", "CI")}
    return {**env, **extra}


def _server_gone(home: Path) -> bool:
    log = home / "serve.log"
    return not (home / "serve.sock").exists() and "bench serve: stopped" in log.read_text()


@pytest.fixture
def started_servers(bench_home: Path) -> Iterator[None]:
    """Whatever server a test's commands started in its home is stopped after it, passed or
    failed (`bench serve` stops cleanly on SIGTERM)."""
    yield
    log = bench_home / "serve.log"
    if not log.exists():
        return
    with contextlib.suppress(AssertionError):  # (one started just now has yet to say its pid)
        _wait_for(lambda: "warming up" in log.read_text(), "the server's pid", seconds=60)
    for pid in re.findall(r"bench serve: pid (\d+) warming up", log.read_text()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGTERM)


@pytest.mark.usefixtures("started_servers")
def test_a_command_that_finds_no_server_starts_one_for_the_next_that_stops_when_idle(
    bench_home: Path, tmp_path: Path
) -> None:
    log = bench_home / "serve.log"
    auto = {"BENCH_AUTO_SERVE": "1", "BENCH_SERVE_IDLE": "600"}
    code, out, err, heavy = _client(["results", "--list"], bench_home, tmp_path, extra=auto)
    assert code == 0, err
    assert "dagster" in heavy or "pandas" in heavy  # it ran in its own process, not waiting
    _wait_for(lambda: "ready on" in log.read_text(), "the server it started")
    code, out, err, heavy = _client(["results", "--list"], bench_home, tmp_path, extra=auto)
    assert code == 0 and heavy == [], err  # the next command was served
    assert re.search(r"pid \d+ runs bench results --list", log.read_text())
    stop = subprocess.run(
        [str(BENCH), "serve", "--stop"], env=_env(bench_home), capture_output=True, timeout=120
    )
    assert stop.returncode == 0
    _wait_for(lambda: _server_gone(bench_home), "the server to stop")
    # No command for its idle time: the next server a command starts stops on its own and
    # removes its socket (nothing raced against the clock: no command is sent to it).
    code, out, err, heavy = _client(
        ["results", "--list"], bench_home, tmp_path, extra={**auto, "BENCH_SERVE_IDLE": "2"}
    )
    assert code == 0, err
    _wait_for(lambda: "no command for 2 s; stopping" in log.read_text(), "the idle server")
    _wait_for(
        lambda: _server_gone(bench_home) and log.read_text().count("bench serve: stopped") == 2,
        "it",
    )
    assert log.read_text().count("ready on") == 2
    assert "Traceback" not in log.read_text()
    # A bad idle time: one line, exit 2, no server.
    bad = subprocess.run(
        [str(BENCH), "serve", "--idle-timeout", "0"],
        env=_env(bench_home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "'0' is not a number of seconds above 0" in bad.stderr
    code, out, err, heavy = _client(
        ["results", "--list"], bench_home, tmp_path, extra={**auto, "BENCH_SERVE_IDLE": "soon"}
    )
    assert code == 0 and "BENCH_SERVE_IDLE='soon' is not a number of seconds" in err
    assert log.read_text().count("warming up") == 2  # (no third server)


@pytest.mark.usefixtures("started_servers")
def test_a_server_started_in_a_project_folder_imports_nothing_from_it(
    bench_home: Path, tmp_path: Path
) -> None:
    # A project whose own module has a standard library's name, where a person runs `bench`:
    # the server a command starts there imports the standard library's (`secrets`, which the
    # runs import, imports `random`), runs none of the project's code and serves the next
    # command. Started with `python -m`, it imported the project's and died at its warm-up.
    project = tmp_path / "project"
    project.mkdir()
    (project / "random.py").write_text("print('PROJECT CODE RAN')\n")
    log = bench_home / "serve.log"
    env = {**_env(bench_home), "BENCH_AUTO_SERVE": "1", "BENCH_SERVE_IDLE": "600"}

    def bench_here() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BENCH), "results", "--list"],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
        )

    first = bench_here()
    assert first.returncode == 0, first.stderr
    _wait_for(lambda: "ready on" in log.read_text() or "Traceback" in log.read_text(), "the server")
    assert "ready on" in log.read_text(), log.read_text()
    second = bench_here()
    assert second.returncode == 0 and second.stdout == first.stdout, second.stderr
    assert re.search(r"pid \d+ runs bench results --list", log.read_text())
    assert "PROJECT CODE RAN" not in log.read_text() + first.stdout + second.stdout
    stop = subprocess.run(
        [str(BENCH), "serve", "--stop"], env=_env(bench_home), capture_output=True, timeout=120
    )
    assert stop.returncode == 0
    _wait_for(lambda: _server_gone(bench_home), "the server to stop")


def _at_a_terminal(home: Path, env: dict[str, str]) -> int:
    """`bench results --list` with its stderr on a pseudo-terminal, as a person runs it."""
    import pty

    main, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [str(BENCH), "results", "--list"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=terminal,
            timeout=600,
        )
    finally:
        os.close(terminal)
        os.close(main)
    return done.returncode


@pytest.mark.usefixtures("started_servers")
def test_a_server_is_started_only_for_a_person_at_a_terminal_never_under_ci(
    bench_home: Path, tmp_path: Path
) -> None:
    log = bench_home / "serve.log"
    idle = {"BENCH_SERVE_IDLE": "120"}
    # A script (stderr not a terminal), CI, or BENCH_AUTO_SERVE=0: nothing started.
    script = subprocess.run(
        [str(BENCH), "results", "--list"],
        env=_auto_env(bench_home, **idle),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert script.returncode == 0, script.stderr
    assert _at_a_terminal(bench_home, _auto_env(bench_home, CI="true", **idle)) == 0
    assert _at_a_terminal(bench_home, _auto_env(bench_home, BENCH_AUTO_SERVE="0", **idle)) == 0
    # No home folder yet: none is made just for a server (whatever the command itself does).
    missing = tmp_path / "no-home"
    _at_a_terminal(missing, _auto_env(missing, **idle))
    assert not log.exists() and not (missing / "serve.log").exists()
    # At a terminal: one is started for the next command.
    assert _at_a_terminal(bench_home, _auto_env(bench_home, **idle)) == 0
    _wait_for(lambda: "ready on" in log.read_text(), "the server it started")
    stop = subprocess.run(
        [str(BENCH), "serve", "--stop"], env=_env(bench_home), capture_output=True, timeout=120
    )
    assert stop.returncode == 0
    _wait_for(lambda: _server_gone(bench_home), "the server to stop")


def test_two_messages_that_arrive_together_are_both_read() -> None:
    # (a quick command's start and exit can reach a slow-to-wake caller in one read)
    from bench_pipeline.cli.handoff import receive, send

    left, right = socket.socketpair()
    with left, right:
        send(left, {"pid": 123})
        send(left, {"exit": 2})
        left.shutdown(socket.SHUT_WR)
        assert receive(right) == ({"pid": 123}, [])
        assert receive(right) == ({"exit": 2}, [])
        assert receive(right) == (None, [])


LISTENER = """
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(sys.argv[1])
sock.listen(1)
print("ready", flush=True)
conn, _ = sock.accept()
conn.settimeout(120)
data = b""
while chunk := conn.recv(65536):
    data += chunk
print(f"GOT {len(data)} {b'sk-victim' in data}", flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/python3").exists(), reason="root")
def test_a_socket_of_another_user_is_never_sent_the_command(tmp_path: Path) -> None:
    """A server socket in a shared folder may be another user's: a command would hand it its
    environment (API keys) and its terminal."""
    shared = Path(tempfile.mkdtemp(prefix="bench-shared-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        home = shared / ".bench"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        other = subprocess.Popen(
            ["/usr/bin/python3", "-c", LISTENER, str(home / "serve.sock")],
            user=65534,
            group=65534,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == "ready"
            env = {**_env(home), "ANTHROPIC_API_KEY": "sk-victim-secret"}
            out = subprocess.run(
                [str(BENCH), "results", "--list"],
                env=env,
                cwd=shared,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert out.returncode == 0, out.stderr
            assert "served by another user (uid 65534)" in out.stderr
            assert other.stdout.readline().strip() == "GOT 0 False"
        finally:
            other.kill()
            other.wait()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


SLOW_AGENT = """
import os, pathlib, sys, time
log = pathlib.Path(sys.argv[1])
with open(log, "a") as fh:
    fh.write(f"start {os.getcwd()}\\n")
time.sleep(1.5)
"""


@pytest.mark.parametrize("how", ["served-sigint", "served-sigkill", "own-process-sigint"])
def test_the_callers_signal_or_death_stops_the_run_and_resume_finishes_it(
    factory: Path, bench_home: Path, tmp_path: Path, request: pytest.FixtureRequest, how: str
) -> None:
    """Ctrl-C stops a run as an interruption (exit 130, one line naming the resume, no
    traceback) whether it runs in its own process or served; a served command whose caller is
    killed stops too, instead of running on unseen."""
    server = request.getfixturevalue("server") if how.startswith("served") else None
    log = tmp_path / "agent.log"
    script = factory / "agents" / "slow.py"
    script.write_text(textwrap.dedent(SLOW_AGENT))
    log.touch()
    (factory / "agents" / "slow.yaml").write_text(
        f"kind: command\ncommand: [python, '{script}', '{log}']\nmax_iterations: 1\n"
        f"mounts: ['{log}:rw']\n"
    )
    tasks = sorted(p.stem for p in (factory / "benchmarks/invoices/tasks").glob("*.yaml"))[:4]
    total = len(tasks) * 2
    launch = factory / "launches" / "slow.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n  - {id: slow, agent: slow}\n"
        f"tasks: {json.dumps(tasks)}\nrepetitions: 2\nscorers: [checks]\nmax_parallel: 1\n"
    )
    trials = bench_home / "warehouse" / "trials"
    proc = subprocess.Popen(
        [str(BENCH), "run", str(launch), "--quiet"],
        env=_env(bench_home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    run_id = re.match(r"run (\S+):", proc.stderr.readline()).group(1)
    _wait_for(lambda: len(list(trials.rglob("*.parquet"))) >= 1, "a first trial")
    (child,) = server.served_pids() if server else [proc.pid]
    os.kill(proc.pid, signal.SIGKILL if how.endswith("sigkill") else signal.SIGINT)
    code = proc.wait(timeout=300)
    text = proc.stderr.read()
    proc.stderr.close()
    if how.endswith("sigint"):  # (served: forwarded to the child, which says so to the caller)
        assert code == 130, text[-3000:]
        assert f"run {run_id} interrupted; finish it with `bench run --resume {run_id}`" in text
        assert "Traceback" not in text
    # Stopped on its own: a served child dies at its interruption, not at a deadline.
    assert wait_until_dead(child, deadline=300), f"the command {child} is still running"
    # It stopped mid-run: not every trial's agent started.
    assert len(log.read_text().splitlines()) < total, log.read_text()

    code, out, err = run_bench("run", "--resume", run_id, "--json", home=bench_home)
    assert code == 0, err
    assert [row["trials"] for row in json.loads(out)["config_table"]] == [total]
    from bench_pipeline.warehouse.store import Warehouse

    rows = Warehouse(bench_home / "warehouse").read("trials", run_id)
    assert set(Counter(rows["trial_id"]).values()) == {1} and len(rows) == total
    assert server is None or "Traceback" not in server.text()
