"""The ledger of adversarial agents: what a `kind: command` agent tries, and what it gets.

Each agent is an inline Python program (`python -c`: no script file in the factory to mount)
that attempts one escape and prints `LEDGER <json>` with what it saw. One `bench run` per
isolation mode runs them all as configurations of one launch, in a child process whose
environment carries secret markers — the harness's own environment, as in production. Each
test asserts the outcome; under `process` the tests assert the weaker, documented behaviour
(README: "Isolation and integrity"), so the gaps of the fallback are pinned, not hidden.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench_pipeline_tests.conftest import SEED, run_bench

pytestmark = pytest.mark.slow

MODES = ("sandbox", "process")
SECRET = "sk-ledger-" + secrets.token_hex(16)
OTHER_SECRET = "sk-ant-ledger-" + secrets.token_hex(16)
BIG_BYTES = 200_000_000
PATCH_CAP = 5_000_000
# The harness — the whole `bench run` process: Dagster and its instance, pandas, pyarrow, the
# trials' threads, the scores and the results — must peak under 300 MB while an agent leaves
# a 200 MB file and prints 50 MB. Measured on a fresh install (what CI runs): 277 MB with the
# file, 257 MB for the same harness on three plain trials; before the run stopped loading
# matplotlib and DuckDB, 347 MB with no large file at all. (A fresh install maps more of each
# shared library than an old one — the kernel caches freshly written files in larger folios —
# so the same code peaks ~35 MB higher in a new venv than in a long-used one.) The growth over
# the floor is held too: holding the diff in memory (the old behaviour: 668 MB, ~360 MB over
# the floor) fails both.
HARNESS_RSS_LIMIT_KB = 300 * 1024
RSS_MARGIN_KB = 100 * 1024
TRIAL_RSS_LIMIT_KB = 300 * 1024
# The harness's peak RSS, printed by the wrapper that runs `bench` in a child process.
# VmHWM, not getrusage's ru_maxrss: a child forked from a large process (pytest after a whole
# suite) carries that process's peak in ru_maxrss even after exec; VmHWM belongs to the
# process's own memory.
PEAK_RSS = """
def peak_rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
"""
WRAPPER = (
    PEAK_RSS
    + """
import resource, sys
from bench_pipeline.cli.main import main
code = main(sys.argv[1:])
sys.stderr.write(f"\\nLEDGER_MAXRSS_KB {peak_rss_kb()}\\n")
sys.exit(code)
"""
)

PRELUDE = """
import json, os, socket, subprocess, sys, time
def report(**found):
    print("LEDGER " + json.dumps(found), flush=True)
"""

AGENTS: dict[str, tuple[str, str]] = {
    # name: (program, extra agent yaml)
    "escape-write": (
        """
target = sys.argv[1]
results = {}
for path in (target, "/tmp/" + os.path.basename(target), os.path.expanduser("~/../" + os.path.basename(target))):
    try:
        with open(path, "w") as fh:
            fh.write("escaped")
        results[path] = "written"
    except OSError as exc:
        results[path] = type(exc).__name__
report(results=results)
""",
        "network: none\n",
    ),
    "read-environ": (
        """
names = ("LEDGER_SECRET_API_KEY=", "ANTHROPIC_API_KEY=")
found, readable = [], 0
pids = [str(os.getppid())] + [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    try:
        data = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError:
        continue
    readable += 1
    if any(n in data for n in names):
        found.append(pid)
report(found=sorted(set(found)), readable=readable, ppid=os.getppid(),
       visible=len([p for p in os.listdir("/proc") if p.isdigit()]))
""",
        "",
    ),
    "encoded-secret": (
        """
import base64, binascii, urllib.parse
key = os.environ["LEDGER_SECRET_API_KEY"]
forms = [key, key[::-1], base64.b64encode(key.encode()).decode(),
         base64.b64encode(key[::-1].encode()).decode(), urllib.parse.quote("/" + key, safe=""),
         binascii.hexlify(key.encode()).decode()]
for f in forms:
    print(f)
open("leak.txt", "w").write("\\n".join(forms) + "\\n")
report(printed=len(forms))
""",
        "env: [LEDGER_SECRET_API_KEY]\n",
    ),
    "setsid-sleep": (
        """
token = sys.argv[4]
marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", token + "-marked"],
                          start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
clean = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", token + "-clean"],
                         start_new_session=True, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
report(started=[marked.pid, clean.pid])
""",
        "",
    ),
    "network-none": (
        """
s = socket.socket()
s.settimeout(10)
try:
    s.connect(("127.0.0.1", int(sys.argv[2])))
    report(connect="connected")
except OSError as exc:
    report(connect=type(exc).__name__)
""",
        "network: none\n",
    ),
    "network-model": (
        """
s = socket.socket()
s.settimeout(10)
try:
    s.connect(("127.0.0.1", int(sys.argv[2])))
    report(connect="connected")
except OSError as exc:
    report(connect=type(exc).__name__)
""",
        "network: model\n",
    ),
    "find-factory": (
        """
graders = bytes.fromhex(sys.argv[3]).decode()  # hex: the path itself is not in our cmdline
factory = os.path.dirname(os.path.dirname(os.path.dirname(graders)))
hits = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for what in ("cmdline", "environ"):
        try:
            if factory.encode() in open(f"/proc/{pid}/{what}", "rb").read():
                hits.append(f"{pid}/{what}")
        except OSError:
            pass
    for link in ("cwd", "root"):
        try:
            if os.readlink(f"/proc/{pid}/{link}").startswith(factory):
                hits.append(f"{pid}/{link}")
        except OSError:
            pass
try:
    mounts = open("/proc/self/mountinfo").read()
except OSError:
    mounts = ""
report(proc_hits=hits, factory_exists=os.path.exists(factory),
       graders=sorted(os.listdir(graders)) if os.path.isdir(graders) else None,
       in_mountinfo=factory in mounts)
""",
        "",
    ),
    "big-file": (
        """
line = "0123456789abcdef" * 6 + "\\n"
with open("big.txt", "w") as fh:
    for _ in range(BIG // len(line)):
        fh.write(line)
chunk = "x" * 1_000_000
for _ in range(50):
    sys.stdout.write(chunk)
sys.stdout.write("\\n")
report(size=os.path.getsize("big.txt"))
""",
        "",
    ),
}


def _agent_argv(name: str, program: str) -> list[str]:
    return ["python", "-c", PRELUDE + program.replace("BIG", str(BIG_BYTES))]


class Listener:
    """A TCP listener on 127.0.0.1 (host network) that counts accepted connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def _bench_env(home: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "BENCH_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "LEDGER_SECRET_API_KEY": SECRET,
        "ANTHROPIC_API_KEY": OTHER_SECRET,
        "BENCH_MAX_PATCH_BYTES": str(PATCH_CAP),
        **extra,
    }


def _seed(root: Path) -> Path:
    example = root / "example"
    subprocess.run(
        [sys.executable, str(SEED), "--out", str(example)], check=True, capture_output=True
    )
    return example / "factory"


def _first_task(factory: Path) -> str:
    return sorted(p.stem for p in (factory / "benchmarks/invoices/tasks").glob("*.yaml"))[0]


def _write_launch(factory: Path, mode: str, args: list[str]) -> Path:
    configs = []
    for name, (program, extra) in AGENTS.items():
        argv = [*_agent_argv(name, program), *args]
        (factory / "agents" / f"{name}.yaml").write_text(
            f"kind: command\ncommand: {json.dumps(argv)}\nmax_iterations: 1\n"
            f"timeout_seconds: 300\nisolation: {mode}\n{extra}"
        )
        configs.append(f"  - {{id: {name}, agent: {name}}}")
    launch = factory / "launches" / "ledger.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n"
        + "\n".join(configs)
        + f"\ntasks: [{_first_task(factory)}]\nrepetitions: 1\nscorers: [checks]\n"
        "max_parallel: 1\n"
    )
    return launch


def _ledger(log_text: str) -> dict[str, Any]:
    lines = [ln for ln in log_text.splitlines() if ln.startswith("LEDGER ")]
    assert lines, log_text[-2000:]
    return json.loads(lines[-1][len("LEDGER ") :])


def _cmdline_pids(needle: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `needle`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmd and state != "Z":
            pids.append(int(entry))
    return pids


def _setsid_child_running(token: str) -> bool:
    """The agent's daemonised grandchild itself is up (argv `python -c SLEEP token`): by then
    bubblewrap has finished setting up, so its die-with-parent is armed. Matching the token
    alone would also match bubblewrap's own command line while it is still starting."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 3 and argv[-2] == token.encode() and argv[-3] == SLEEP.encode():
            return True
    return False


def _gone(needle: str, deadline_seconds: float = 60) -> bool:
    """True once no live process matches (a zombie is dead); waits up to the deadline."""
    deadline = time.monotonic() + deadline_seconds
    while _cmdline_pids(needle):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _kill(needle: str) -> None:
    for pid in _cmdline_pids(needle):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module", params=MODES)
def ledger(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    mode = request.param
    if mode == "sandbox":
        from bench_pipeline.workspace.sandbox import sandbox_available

        ok, why = sandbox_available()
        # CI installs bubblewrap (make system-deps): there a missing sandbox is a failure.
        assert ok, f"bubblewrap cannot run here: {why}"
    root = tmp_path_factory.mktemp(f"ledger-{mode}")
    factory = _seed(root)
    home = root / "bench-home"
    home.mkdir()
    outside = root / "outside"
    outside.mkdir()
    token = f"ledger-sleep-{secrets.token_hex(6)}"
    target = outside / f"escaped-{secrets.token_hex(4)}.txt"
    listener = Listener()
    graders = factory / "benchmarks" / "invoices" / "graders"
    # Every agent gets the same arguments: target, port, graders (hex), token.
    args = [str(target), str(listener.port), str(graders).encode().hex(), token]
    launch = _write_launch(factory, mode, args)
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, "--home", str(home), "run", str(launch), "--json"],
        env=_bench_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rss = int(re.search(r"LEDGER_MAXRSS_KB (\d+)", proc.stderr).group(1))
    # The same harness in the same environment on three trials with no large file: the floor
    # the ledger's peak is measured against (imports, Dagster, results), which depends on the
    # machine and on what ran before in this process tree, not on the 200 MB file.
    floor_home = root / "floor-home"
    floor = subprocess.run(
        [sys.executable, "-c", WRAPPER, "--home", str(floor_home), "run",
         str(factory / "launches" / "demo.yaml"), "--max", "1", "--repeats", "1", "--json"],
        env=_bench_env(floor_home),
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert floor.returncode == 0, floor.stderr[-3000:]
    rss_floor = int(re.search(r"LEDGER_MAXRSS_KB (\d+)", floor.stderr).group(1))
    from bench_pipeline.warehouse.store import Warehouse

    trials = Warehouse(home / "warehouse").read("trials").to_dict("records")
    by_config = {t["config_id"]: t for t in trials}
    yield {
        "mode": mode,
        "home": home,
        "factory": factory,
        "target": target,
        "token": token,
        "listener": listener,
        "trials": by_config,
        "rss_kb": rss,
        "rss_floor_kb": rss_floor,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
    }
    _kill(token)
    shutil.rmtree(root, ignore_errors=True)
    Path("/tmp", target.name).unlink(missing_ok=True)


def _evidence(ledger: dict[str, Any], config: str) -> Path:
    return Path(ledger["trials"][config]["evidence_dir"])


def _agent_report(ledger: dict[str, Any], config: str) -> dict[str, Any]:
    return _ledger((_evidence(ledger, config) / "agent-attempt1.log").read_text())


def test_every_trial_records_the_isolation_it_ran_with(ledger: dict[str, Any]) -> None:
    for config, trial in ledger["trials"].items():
        assert trial["isolation"] == ledger["mode"], config
        meta = json.loads((_evidence(ledger, config) / "metadata.json").read_text())
        assert meta["isolation"] == ledger["mode"]
        # The prompt the agent got is kept in the evidence in both modes.
        assert (_evidence(ledger, config) / "prompt-attempt1.md").read_text().strip()
    assert ledger["trials"]["network-none"]["network"] == "none"
    assert ledger["trials"]["network-model"]["network"] == "model"
    shown = json.loads(ledger["stdout"])["isolation"]
    assert {row["isolation"] for row in shown} == {ledger["mode"]}
    gaps = {g for row in shown for g in row["not_guaranteed"]}
    if ledger["mode"] == "process":
        # The results say what the fallback does not guarantee.
        assert {"files", "harness_proc", "network", "env_cleared_descendants"} <= gaps
    else:
        assert gaps == set()


def test_write_outside_the_workspace(ledger: dict[str, Any]) -> None:
    report = _agent_report(ledger, "escape-write")["results"]
    host_tmp = Path("/tmp", ledger["target"].name)
    if ledger["mode"] == "sandbox":
        assert not ledger["target"].exists() and not host_tmp.exists(), report
    else:  # documented gap: `process` does not confine files
        assert ledger["target"].exists() and host_tmp.exists()


def test_reading_every_proc_environ_finds_no_secret(ledger: dict[str, Any]) -> None:
    report = _agent_report(ledger, "read-environ")
    if ledger["mode"] == "sandbox":
        assert report["readable"] >= 1  # it did read /proc: only the sandbox's processes
        assert report["visible"] <= 3, report  # bubblewrap's init, the agent, its `ls`-like self
        assert report["found"] == [], report
    else:  # documented gap: the harness's /proc/<pid>/environ is readable by a same-user agent
        assert str(report["ppid"]) in report["found"], report


def test_encoded_secrets_never_reach_the_state_dir(ledger: dict[str, Any]) -> None:
    assert _agent_report(ledger, "encoded-secret")["printed"] == 6
    forms = set()
    for value in (SECRET, OTHER_SECRET):
        for v in (value, value[::-1]):
            forms |= {
                v,
                base64.b64encode(v.encode()).decode(),
                base64.b64encode(v.encode()).decode().rstrip("="),
                base64.urlsafe_b64encode(v.encode()).decode(),
                urllib.parse.quote("/" + v, safe=""),
                v.encode().hex(),
            }
    # grep -r over the whole state dir (evidence, warehouse, Dagster's storage, logs) for each.
    for form in sorted(forms):
        hit = subprocess.run(
            ["grep", "-r", "-l", "-F", "-a", form, str(ledger["home"])],
            capture_output=True,
            text=True,
        )
        assert hit.returncode == 1, (form, hit.stdout)
    assert SECRET not in ledger["stdout"] + ledger["stderr"]
    # The agent did write them into its workspace: the patch holds the redacted text.
    patch = (_evidence(ledger, "encoded-secret") / "changes.patch").read_text()
    assert "leak.txt" in patch and "[REDACTED]" in patch


def test_setsid_children_do_not_outlive_the_trial(ledger: dict[str, Any]) -> None:
    token = ledger["token"]
    assert _agent_report(ledger, "setsid-sleep")["started"]
    assert _gone(token + "-marked"), "a setsid child carrying the trial marker survived"
    if ledger["mode"] == "sandbox":
        assert _gone(token + "-clean"), "the PID namespace should have killed it"
    else:  # documented gap: a descendant that clears its environment loses the marker
        assert _cmdline_pids(token + "-clean"), "expected the documented process-mode escape"
        _kill(token + "-clean")


def test_network_none_refuses_and_model_connects(ledger: dict[str, Any]) -> None:
    none = _agent_report(ledger, "network-none")["connect"]
    model = _agent_report(ledger, "network-model")["connect"]
    assert model == "connected"
    if ledger["mode"] == "sandbox":
        assert none == "ConnectionRefusedError"
    else:  # documented gap: `process` does not restrict the network
        assert none == "connected"


def test_the_factory_and_graders_are_not_visible(ledger: dict[str, Any]) -> None:
    report = _agent_report(ledger, "find-factory")
    if ledger["mode"] == "sandbox":
        assert report["factory_exists"] is False and report["graders"] is None, report
        assert report["proc_hits"] == [] and report["in_mountinfo"] is False, report
    else:  # documented gap: /proc of the harness names the factory; the files are readable
        assert report["factory_exists"] and report["graders"], report
        assert report["proc_hits"], report


def test_a_200_mb_file_leaves_bounded_evidence_and_bounded_memory(
    ledger: dict[str, Any],
) -> None:
    assert _agent_report(ledger, "big-file")["size"] >= BIG_BYTES - 200
    trial = ledger["trials"]["big-file"]
    folder = _evidence(ledger, "big-file")
    assert trial["evidence_truncated"] is True
    meta = json.loads((folder / "metadata.json").read_text())["evidence"]
    patch = meta["files"]["changes.patch"]
    assert patch["truncated"] and patch["full_bytes"] > BIG_BYTES
    assert (folder / "changes.patch").stat().st_size <= PATCH_CAP + 200
    # 50 MB on stdout: the log holds at most the output cap, the full size is recorded.
    assert (folder / "agent-attempt1.log").stat().st_size <= meta["caps"]["output_bytes"] + 500
    (out,) = [o for o in meta["outputs"] if o["bytes"] > 50_000_000]
    assert out["kept"] <= meta["caps"]["output_bytes"]
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert total < PATCH_CAP + 3 * meta["caps"]["output_bytes"]
    # Bounded memory: the harness peaks under 300 MB, and the 200 MB file and 50 MB of output
    # add at most RSS_MARGIN_KB over the same harness's floor (the old capture added ~360 MB).
    rss, floor = ledger["rss_kb"], ledger["rss_floor_kb"]
    shown = f"harness peak RSS {rss} kB, {rss - floor} kB over its floor {floor} kB"
    assert rss < HARNESS_RSS_LIMIT_KB, shown
    assert rss - floor < RSS_MARGIN_KB, shown


MEASURE = (
    PEAK_RSS
    + """
import resource, sys
from pathlib import Path
from bench_pipeline.workspace.evidence import write_patch
from bench_pipeline.workspace.process import run_command
from bench_pipeline.workspace.sandbox import Isolation
ws, sha, dest = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
iso = Isolation(sys.argv[4], writable=(ws,))
out = run_command(["sh", "-c", "yes 0123456789abcdef | head -c 200000000"], ws, {"PATH": "/usr/bin:/bin"}, 300, isolation=iso)
info = write_patch(ws, sha, dest, 5_000_000, lambda t: t)
print(out.output_bytes, len(out.output), info["full_bytes"], info["bytes"],
      peak_rss_kb())
"""
)


@pytest.mark.parametrize("mode", MODES)
def test_the_patch_and_capture_of_200_mb_stay_under_300_mb_rss(
    mode: str, example: Path, tmp_path: Path
) -> None:
    from bench_pipeline.formats.git import run_git
    from bench_pipeline.workspace.repo import create_workspace

    repo = example / "service-repo"
    sha = run_git(["rev-parse", "HEAD"], repo).decode().strip()
    ws = create_workspace(str(repo), sha, tmp_path / "ws")
    line = "0123456789abcdef" * 6 + "\n"
    block = line * 10_000  # in blocks: a forked child inherits our peak RSS as its own
    with open(ws / "big.txt", "w") as fh:
        for _ in range(BIG_BYTES // len(block) + 1):
            fh.write(block)
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(ws), sha, str(tmp_path / "changes.patch"), mode],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    printed, kept, full, written, rss = (int(x) for x in proc.stdout.split())
    assert printed == 200_000_000 and kept < 1_100_000
    assert full > BIG_BYTES and written <= 5_000_200
    assert rss < TRIAL_RSS_LIMIT_KB, f"peak RSS {rss} kB"


SLEEP = "import time; time.sleep(300)"
CRASH_AGENT = f"""
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", {SLEEP!r}, sys.argv[1]], start_new_session=True)
time.sleep(300)
"""


@pytest.mark.parametrize("mode", MODES)
def test_kill_9_of_bench_run_then_resume_leaves_no_trial_process(
    mode: str, factory: Path, bench_home: Path
) -> None:
    token = f"ledger-crash-{secrets.token_hex(6)}"
    argv = ["python", "-c", CRASH_AGENT, token]
    (factory / "agents" / "crash.yaml").write_text(
        f"kind: command\ncommand: {json.dumps(argv)}\nmax_iterations: 1\n"
        f"timeout_seconds: 6\nisolation: {mode}\n"
    )
    launch = factory / "launches" / "crash.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n  - {id: crash, agent: crash}\n"
        f"tasks: [{_first_task(factory)}]\nrepetitions: 1\nscorers: [checks]\n"
    )
    bench = Path(sys.executable).parent / "bench"
    proc = subprocess.Popen(
        [str(bench), "--home", str(bench_home), "run", str(launch), "--quiet"],
        env={**_bench_env(bench_home), "BENCH_MAX_PATCH_BYTES": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        run_id = re.match(r"run (\S+):", proc.stderr.readline()).group(1)
        deadline = time.monotonic() + 120
        while not _setsid_child_running(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _setsid_child_running(token), "the agent's setsid child never started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if mode == "sandbox":  # structural: the PID namespace dies with the harness
            assert _gone(token), "a sandboxed process outlived kill -9 of bench run"
        code, out, err = run_bench("run", "--resume", run_id, "--json", home=bench_home)
        assert code == 0, err
        assert _gone(token), "a trial process survived kill -9 + --resume"
    finally:
        _kill(token)
        if proc.poll() is None:
            proc.kill()


def _simple_agent(factory: Path, extra: str = "") -> Path:
    argv = ["python", "-c", "print('hello')"]
    (factory / "agents" / "plain.yaml").write_text(
        f"kind: command\ncommand: {json.dumps(argv)}\nmax_iterations: 1\n{extra}"
    )
    launch = factory / "launches" / "plain.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n  - {id: plain, agent: plain}\n"
        f"tasks: [{_first_task(factory)}]\nrepetitions: 1\nscorers: [checks]\n"
    )
    return launch


def test_without_bubblewrap_the_default_falls_back_to_process_and_says_so(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_BWRAP", "/nonexistent/bwrap")
    code, out, err = run_bench("run", str(_simple_agent(factory)), home=bench_home)
    assert code == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning: sandbox unavailable")]
    assert len(warnings) == 1 and "isolation: process" in warnings[0], err
    from bench_pipeline.warehouse.store import Warehouse

    (trial,) = Warehouse(bench_home / "warehouse").read("trials").to_dict("records")
    assert trial["isolation"] == "process"
    assert "isolation: plain: process" in out and "not guaranteed" in out


def test_an_explicit_sandbox_that_cannot_run_is_refused_before_the_run(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_BWRAP", "/nonexistent/bwrap")
    launch = _simple_agent(factory, "isolation: sandbox\n")
    code, out, err = run_bench("run", str(launch), home=bench_home)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert "plain.yaml" in line and "isolation" in line and "isolation: process" in line
    assert not (bench_home / "evidence").exists()


def test_an_unknown_isolation_or_network_is_a_one_line_error(
    factory: Path, bench_home: Path
) -> None:
    for extra, key in (("isolation: container\n", "isolation"), ("network: host\n", "network")):
        code, _, err = run_bench("run", str(_simple_agent(factory, extra)), home=bench_home)
        assert code == 2
        (line,) = err.strip().splitlines()
        assert "plain.yaml" in line and key in line


def test_a_config_overrides_the_agents_isolation(factory: Path, bench_home: Path) -> None:
    launch = _simple_agent(factory, "network: none\n")
    launch.write_text(
        launch.read_text().replace(
            "{id: plain, agent: plain}", "{id: plain, agent: plain, isolation: process}"
        )
    )
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    (row,) = json.loads(out)["isolation"]
    assert row["isolation"] == "process" and row["network"] == "none"
    assert "warning" not in err  # asked for, not fallen back to
