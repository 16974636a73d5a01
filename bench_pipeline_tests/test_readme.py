"""The README as a user follows it: `make demo`'s steps, then every command of "After the
demo" exactly as written, from a repository root; and every factory YAML the README shows is
the real file."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from bench_pipeline_tests.processes import wait_until_group_gone

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
VENV = Path(sys.executable).parent.parent
UI_URL = "http://127.0.0.1:3000/server_info"
UI_DEADLINE_SECONDS = 240  # `dagster dev` answers in 7-9 s idle; far longer on a loaded machine


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def bash_commands(text: str) -> list[str]:
    """Each command line of the section's ```bash blocks, without its trailing comment."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


@pytest.fixture(scope="module")
def repo_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh repository root after `make demo`'s steps: the venv, data/ and the seeded
    example, the demo run with the default state folder (./.bench)."""
    root = tmp_path_factory.mktemp("checkout")
    (root / ".venv").symlink_to(VENV)
    shutil.copytree(ROOT / "data", root / "data", ignore=shutil.ignore_patterns("example"))
    env = {k: v for k, v in os.environ.items() if k not in ("BENCH_HOME", "DAGSTER_HOME")}
    # As on a fresh shell: the venv's bin/ is not on PATH.
    env["PATH"] = os.pathsep.join(
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if Path(p).resolve() != (VENV / "bin").resolve()
    )
    demo = re.search(r"^demo: install\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert demo, "the Makefile's demo target"
    for recipe in demo.group(1).splitlines():
        command = (
            recipe.strip()
            .replace("$(BIN)", ".venv/bin")
            .replace("$(EXAMPLE)", "data/example/factory")
        )
        proc = subprocess.run(
            ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
    return root, env


def test_the_after_the_demo_commands_work_as_written(
    repo_root: tuple[Path, dict[str, str]],
) -> None:
    root, env = repo_root
    commands = bash_commands(section("After the demo"))
    assert any("bench ui" in c for c in commands) and any("duckdb" in c for c in commands)
    for command in commands:
        if command.endswith(" ui"):
            _check_ui(command, root, env)
            continue
        # The DuckDB shell reads its queries from stdin, as a user would type them.
        stdin = "SELECT count(*) AS trials FROM trials;\n" if "duckdb" in command else None
        proc = subprocess.run(
            ["bash", "-c", command], cwd=root, env=env, input=stdin, capture_output=True, text=True
        )
        assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, (command, proc.stderr)
        if stdin:
            assert "84" in proc.stdout, proc.stdout  # the demo's 84 trials
    assert list(root.glob("*-report.html")), "bench report wrote its file in the current folder"


def _check_ui(command: str, root: Path, env: dict[str, str]) -> None:
    """Started as written, answered on 127.0.0.1, stopped with its whole process group."""
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=root,
        env={**env, "DAGSTER_DISABLE_TELEMETRY": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # dagster dev ignores SIGTERM from a background shell: own group
    )
    try:
        deadline = time.monotonic() + UI_DEADLINE_SECONDS
        answered = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(UI_URL, timeout=5) as reply:
                    answered = reply.read().decode()
                    break
            except OSError:
                time.sleep(1)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        assert answered and "dagster_webserver_version" in answered, answered
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert wait_until_group_gone(proc.pid)


def test_every_factory_yaml_the_readme_shows_is_the_real_file() -> None:
    shown = re.findall(r"\*\*([\w/.-]+\.yaml)\*\*\n\n```yaml\n(.*?)```", README, flags=re.S)
    assert len(shown) >= 6
    for path, block in shown:
        real = ROOT / "data" / "templates" / "factory" / path
        assert real.is_file(), f"README shows {path}, which the example does not have"
        assert block == real.read_text(), f"README's {path} differs from {real}"


def test_the_readme_run_command_fits_the_launch_cost_cap(tmp_path: Path) -> None:
    """`bench run models.yaml --max-cost N` as the README shows it must not be refused."""
    commands = [c for c in bash_commands(README) if "models.yaml --max-cost" in c]
    assert commands
    limit = float(re.search(r"--max-cost (\d+(?:\.\d+)?)", commands[0]).group(1))
    seeded = tmp_path / "example"
    subprocess.run([sys.executable, str(ROOT / "data/seed.py"), "--out", str(seeded)], check=True)
    # The cap is the launch's arithmetic (budgets x trials); computed without the preflight that
    # `bench estimate` adds (it needs ANTHROPIC_API_KEY and the claude CLI installed).
    from bench_pipeline.formats.loader import load_launch, load_prices
    from bench_pipeline.formats.refs import FactoryView
    from bench_pipeline.runs.estimate import estimate_launch
    from bench_pipeline.warehouse.store import Warehouse

    launch = load_launch(seeded / "factory/launches/models.yaml")
    prices = load_prices(FactoryView(launch.factory_root))
    cap = estimate_launch(launch, prices, Warehouse(str(tmp_path / "warehouse")))["cost_cap_usd"]
    assert cap is not None and cap <= limit, (cap, limit)


def test_the_warm_server_commands_work_as_written(repo_root: tuple[Path, dict[str, str]]) -> None:
    """`bench serve &`, a run handed to it, `bench serve --stop`: as the README shows them."""
    root, env = repo_root
    commands = bash_commands(section("Commands"))
    start = next(c for c in commands if c.endswith("serve &"))
    rest = commands[commands.index(start) + 1 :]
    rest = rest[: next(i for i, c in enumerate(rest) if c.endswith("serve --stop")) + 1]
    log = root / "serve.log"
    server = subprocess.Popen(
        ["bash", "-c", f"exec {start.removesuffix('&').strip()} 2> {log}"],
        cwd=root,
        env={**env, "DAGSTER_DISABLE_TELEMETRY": "1"},
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while "ready on" not in (log.read_text() if log.exists() else ""):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        for command in rest:
            proc = subprocess.run(
                ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True
            )
            assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
            assert "Traceback" not in proc.stderr, (command, proc.stderr)
        assert server.wait(timeout=120) == 0
        served = log.read_text()
        assert "runs bench run data/example/factory/launches/demo.yaml" in served, served
        assert not (root / ".bench" / "serve.sock").exists()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_the_server_a_command_starts_works_as_written(
    repo_root: tuple[Path, dict[str, str]],
) -> None:
    """A command that finds no server starts one, the next is served, `--stop` ends it: the
    README's three commands, as written."""
    root, env = repo_root
    commands = bash_commands(section("Commands"))
    first = next(c for c in commands if c.startswith("BENCH_AUTO_SERVE=1 "))
    served, stop = commands[commands.index(first) + 1 : commands.index(first) + 3]
    assert stop.endswith("serve --stop")
    log = root / ".bench" / "serve.log"
    before = log.read_text() if log.exists() else ""

    def run(command: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (command, proc.stderr)
        return proc

    try:
        run(first)
        deadline = time.monotonic() + 300
        while "ready on" not in log.read_text().removeprefix(before):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        run(served)
        assert "runs bench results --list" in log.read_text().removeprefix(before)
        run(stop)
        deadline = time.monotonic() + 120
        while "bench serve: stopped" not in log.read_text().removeprefix(before):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert not (root / ".bench" / "serve.sock").exists()
    finally:
        text = log.read_text().removeprefix(before) if log.exists() else ""
        for pid in re.findall(r"bench serve: pid (\d+) warming up", text):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
