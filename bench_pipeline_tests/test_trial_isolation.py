"""Trial isolation: grader integrity, timeouts that kill whole process groups, bounded
parallelism, and a source checkout that is never touched."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.processes import is_alive, wait_until_dead

TAMPER = """
import pathlib, sys
# The usage file lives in the trial's evidence folder, next to the grader snapshot.
inputs = pathlib.Path(sys.argv[1]).parent / "inputs" / "graders"
for grader in inputs.glob("*.py"):
    grader.chmod(0o644)
    grader.write_text("import sys\\nsys.exit(0)\\n")
"""

SLEEPER = """
import pathlib, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
pathlib.Path(sys.argv[1]).write_text(f"{child.pid}\\n")
time.sleep(1000)
"""

OVERLAP = """
import os, pathlib, sys, time
log = pathlib.Path(sys.argv[1])
with open(log, "a") as fh:
    fh.write(f"start {time.monotonic()}\\n")
time.sleep(0.6)
with open(log, "a") as fh:
    fh.write(f"end {time.monotonic()}\\n")
"""


def _command_launch(
    factory: Path, name: str, script: str, args: list[str], extra: str = "", tasks: int = 2
) -> Path:
    (factory / "agents" / f"{name}.py").write_text(textwrap.dedent(script))
    argv = json.dumps(["python", str(factory / "agents" / f"{name}.py"), *args])
    (factory / "agents" / f"{name}.yaml").write_text(
        f"kind: command\ncommand: {argv}\nmax_iterations: 1\n{extra}"
    )
    task_ids = sorted(p.stem for p in (factory / "benchmarks/invoices/tasks").glob("*.yaml"))[
        :tasks
    ]
    launch = factory / "launches" / f"{name}.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\n"
        f"configs:\n  - {{id: {name}, agent: {name}}}\n"
        f"tasks: {json.dumps(task_ids)}\nrepetitions: 1\nscorers: [checks]\nmax_parallel: 2\n"
    )
    return launch


def _trials(home: Path) -> list[dict]:
    from bench_pipeline.warehouse.store import Warehouse

    return Warehouse(home / "warehouse").read("trials").to_dict("records")


def test_a_grader_changed_by_the_agent_invalidates_the_trial(
    factory: Path, bench_home: Path
) -> None:
    # Only the `process` fallback lets an agent reach the grader snapshot at all (the sandbox
    # does not mount it: test_sandbox_ledger.py); the hash check is what catches it there.
    launch = _command_launch(
        factory, "tamper", TAMPER, ["{usage_file}"], "isolation: process\n", tasks=1
    )
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    (trial,) = _trials(bench_home)
    assert trial["outcome"] == "invalidated"
    assert "grader integrity" in trial["error"] and "changed after the agent" in trial["error"]
    row = json.loads(out)["config_table"][0]
    # Invalidated is not a pass and not the agent's failure: the trial is not scored.
    assert row["scored_checks"] == 0 and row["of_checks"] == 1
    # The text says so too: the failed result check, and why the cell is not scored.
    code, out, err = run_bench("results", home=bench_home)
    assert code == 0, err
    assert (
        "check grader_integrity failed (error); expected: No trial was invalidated by a changed "
        f"grader file. (invalidated_trials=1, trials={trial['trial_id']})"
    ) in out
    assert (
        f"  tamper · checks: 1 of 1 (1 not_scored)\n    e.g. {trial['trial_id']} (not_scored): "
        in out
    )
    assert "trial not scored: outcome invalidated" in out
    # The factory's own grader is untouched.
    grader = factory / "benchmarks/invoices/graders"
    assert all("sys.exit(0)\n" != p.read_text() for p in grader.glob("*.py"))


def test_an_agent_that_sleeps_forever_is_killed_with_its_child_at_timeout(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    # `process`: the pid the agent writes must be a host pid (the sandbox has its own).
    launch = _command_launch(
        # Long enough for a loaded machine to start python twice and write the pid file.
        factory,
        "sleeper",
        SLEEPER,
        [str(pid_file)],
        "timeout_seconds: 6\nisolation: process\n",
        tasks=1,
    )
    code, _, err = run_bench("run", str(launch), home=bench_home)
    assert code == 0, err
    (trial,) = _trials(bench_home)
    assert trial["outcome"] == "budget_exceeded"
    assert "timeout" in trial["error"]
    child = int(pid_file.read_text())
    # Killed with its group at the timeout; PID 1 may take a while to reap the orphan.
    assert wait_until_dead(child), f"child {child} of the timed-out agent is still running"
    code, _, _ = run_bench("results", "--fail-on-error", home=bench_home)
    assert code == 1


def test_trials_of_a_partition_run_concurrently_up_to_max_parallel(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "overlap.log"
    log.touch()  # mounted into each trial's sandbox, the only file outside it the agent writes
    launch = _command_launch(
        factory, "overlap", OVERLAP, [str(log)], f"mounts: ['{log}:rw']\n", tasks=5
    )
    code, _, err = run_bench("run", str(launch), home=bench_home)
    assert code == 0, err
    events = sorted(
        (float(t), kind) for kind, t in (ln.split() for ln in log.read_text().splitlines())
    )
    running = peak = 0
    for _, kind in events:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2  # max_parallel: 2 — concurrent, never more


def test_the_source_checkout_is_never_modified(example: Path, bench_home: Path) -> None:
    repo = example / "service-repo"
    (repo / "scratch.txt").write_text("uncommitted work\n")
    status_before = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
    ).stdout
    refs_before = subprocess.run(
        ["git", "show-ref"], cwd=repo, capture_output=True, text=True
    ).stdout
    code, _, err = run_bench(
        "run",
        str(example / "factory/launches/demo.yaml"),
        "--max",
        "2",
        "--repeats",
        "1",
        home=bench_home,
    )
    assert code == 0, err
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
        ).stdout
        == status_before
    )
    assert (
        subprocess.run(["git", "show-ref"], cwd=repo, capture_output=True, text=True).stdout
        == refs_before
    )
    # Workspaces were separate repositories with no remote and only the bench branch.
    from bench_pipeline.formats.loader import load_launch
    from bench_pipeline.workspace.repo import create_workspace

    task = load_launch(example / "factory/launches/demo.yaml").tasks[0]
    ws = create_workspace(task.repo, task.base_sha, bench_home / "probe")
    assert subprocess.run(["git", "remote"], cwd=ws, capture_output=True, text=True).stdout == ""
    assert subprocess.run(
        ["git", "branch", "--list"], cwd=ws, capture_output=True, text=True
    ).stdout.split() == ["*", "bench"]
    assert not (ws / "scratch.txt").exists()


def test_two_launches_at_once_share_the_global_trial_pool(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    """The instance's `bench_trials` pool admits one partition at a time across runs: two
    concurrent `bench run`s never have more than one partition's trials (max_parallel 2) alive."""
    import sys

    log = tmp_path / "overlap.log"
    log.touch()
    launch = _command_launch(
        factory,
        "overlap",
        OVERLAP.replace("0.6", "1.5"),
        [str(log)],
        f"mounts: ['{log}:rw']\n",
        tasks=4,
    )
    bench = Path(sys.executable).parent / "bench"
    env = {
        **os.environ,
        "BENCH_HOME": str(bench_home),
        "DAGSTER_HOME": str(bench_home / "dagster_home"),
    }
    # Create the instance (its SQLite schema and pool configuration) before the two runs race.
    from bench_pipeline.defs.launcher import get_instance
    from bench_pipeline.runs.paths import BenchPaths

    get_instance(BenchPaths.from_home(bench_home)).dispose()
    procs = [
        subprocess.Popen(
            [str(bench), "--home", str(bench_home), "run", str(launch), "--quiet"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    events = sorted(
        (float(t), kind) for kind, t in (ln.split() for ln in log.read_text().splitlines())
    )
    assert len(events) == 2 * 2 * 4  # two runs x four trials x (start, end)
    running = peak = 0
    for _, kind in events:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2, events


def test_a_zombie_counts_as_dead() -> None:
    """The helpers themselves: a child killed and not yet reaped is a zombie, and dead."""
    import signal

    child = subprocess.Popen(["sleep", "300"])
    try:
        assert is_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        # Not reaped yet (we have not waited): the kernel keeps it as a zombie for us.
        assert wait_until_dead(child.pid)
        assert Path(f"/proc/{child.pid}").exists()  # still in the table, as a zombie
    finally:
        child.wait()
    assert not is_alive(child.pid)


def test_a_users_git_template_hooks_never_reach_a_trial_repository(
    example: Path, tmp_path: Path, monkeypatch
) -> None:
    """A user's init.templateDir (e.g. a company's commit hooks) would be copied into every
    trial's repository by `git init` and run by an agent's `git commit` there."""
    from bench_pipeline.formats.loader import load_launch
    from bench_pipeline.workspace.repo import create_workspace

    ran = tmp_path / "hook-ran"
    hooks = tmp_path / "template" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text(f"#!/bin/sh\ntouch {ran}\n")
    (hooks / "pre-commit").chmod(0o755)
    config = tmp_path / "gitconfig"
    config.write_text(f"[init]\n\ttemplateDir = {tmp_path / 'template'}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    # (the template is what `git init` copies: a plain repository made the same way has it)
    subprocess.run(["git", "init", "-q", str(tmp_path / "plain")], check=True)
    assert (tmp_path / "plain" / ".git" / "hooks" / "pre-commit").exists()

    task = load_launch(example / "factory/launches/demo.yaml").tasks[0]
    ws = create_workspace(task.repo, task.base_sha, tmp_path / "ws")
    subprocess.run(
        ["git", "-c", "user.name=a", "-c", "user.email=a@example.com"]
        + ["commit", "-q", "--allow-empty", "-m", "agent's commit"],
        cwd=ws,
        check=True,
    )
    assert not ran.exists()
    assert not (ws / ".git" / "hooks").exists()


def test_every_trial_repository_starts_as_git_init_makes_it(example: Path, tmp_path: Path) -> None:
    """git runs `init` once per filesystem; later trials' repositories are written from what it
    made: the same folders, bytes and modes, and git works in them (status, fsck, commit)."""
    from bench_pipeline.formats.loader import load_launch
    from bench_pipeline.workspace.repo import INIT_ARGS, create_workspace

    def tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
        return {
            str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode) if p.is_file() else None
            for p in root.rglob("*")
        }

    task = load_launch(example / "factory/launches/demo.yaml").tasks[0]
    subprocess.run(["git", *INIT_ARGS, str(tmp_path / "plain")], check=True)
    made_by_git = tree(tmp_path / "plain" / ".git")
    assert "HEAD" in made_by_git and "objects/info" in made_by_git
    for n in range(3):  # the first trial on this filesystem runs git; the others do not
        ws = create_workspace(task.repo, task.base_sha, tmp_path / "work" / f"rep{n}" / "repo")
        now = tree(ws / ".git")
        # (the checkout adds its index, logs and ORIG_HEAD; git init's files stay as it wrote them)
        assert {k: now.get(k) for k in made_by_git} == {
            k: v for k, v in made_by_git.items() if k != "objects/info/alternates"
        }
        git = ["git", "-c", "user.name=a", "-c", "user.email=a@example.com"]
        assert (
            subprocess.run(
                [*git, "status", "--porcelain"], cwd=ws, capture_output=True, text=True, check=True
            ).stdout
            == ""
        )
        subprocess.run([*git, "fsck", "--no-dangling", "--no-progress"], cwd=ws, check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], cwd=ws, check=True)
        head = subprocess.run(
            [*git, "rev-parse", "--abbrev-ref", "HEAD"], cwd=ws, capture_output=True, text=True
        )
        assert head.stdout.strip() == "bench"
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["rep0", "rep1", "rep2"]
    assert not list((tmp_path / "work").rglob(".git-init-*"))  # git's own run left nothing


def test_folders_handed_to_background_removal_are_gone_once_it_closes(tmp_path: Path) -> None:
    """Finished trials' folders go in the background (a trial's slot does not wait for the
    kernel to release a sandbox's mounts), and nothing is left once the pool closes it: each
    folder and the parents it left empty, never a parent another trial still uses."""
    from bench_pipeline.workspace.repo import BackgroundRemoval

    work = tmp_path / "work"
    done = [work / "run" / "task-a" / "cfg" / f"rep{n}" for n in (1, 2)]
    running = work / "run" / "task-b" / "cfg" / "rep1"
    for folder in (*done, running):
        (folder / "repo" / ".git").mkdir(parents=True)
        (folder / "repo" / "module.py").write_text("x = 1\n")
    grading = tmp_path / "bench-grading-1"
    (grading / "hidden").mkdir(parents=True)
    removal = BackgroundRemoval()
    for folder in done:
        removal.remove(folder, work)
    removal.remove(grading, None)
    removal.close()
    assert not (work / "run" / "task-a").exists() and not grading.exists()
    assert (running / "repo" / "module.py").read_text() == "x = 1\n"
    removal.close()  # closing again waits for nothing
    with BackgroundRemoval() as again:  # and a new one starts its own thread
        again.remove(running, work)
    assert list(work.iterdir()) == []


EARLY_EXIT = {
    # each ends (or disarms) the grader that imports the package, on the base's unfixed code
    "exit0": "import os as _os\n_os._exit(0)\n",
    "sysexit0": "import sys as _sys\n_sys.exit(0)\n",
    "noexit": "import sys as _sys\n_sys.exit = lambda *args: None\n",
    # codes the checks never declared: alone a grader fault, unscored
    "exit2": "import os as _os\n_os._exit(2)\n",
    "sigkill": "import os as _os, signal as _sig\n_os.kill(_os.getpid(), _sig.SIGKILL)\n",
    # the grader finishes (and fails), then an atexit hook ends the process with another code
    "atexit0": "import atexit as _a, os as _o\n_a.register(_o._exit, 0)\n",
    "atexit2": "import atexit as _a, os as _o\n_a.register(_o._exit, 2)\n",
}


def test_code_under_test_that_ends_its_grader_early_passes_no_check(
    factory: Path, bench_home: Path
) -> None:
    """A check is its grader's exit code, and the grader imports the code under test: before,
    `os._exit(0)` at the top of the package made every check of every task pass."""
    configs = []
    for name, prefix in EARLY_EXIT.items():
        script = (
            "import pathlib, sys\nsys.stdin.read()\n"
            "init = pathlib.Path('invoices/__init__.py')\n"
            f"init.write_text({prefix!r} + init.read_text())\n"
        )
        launch = _command_launch(factory, name, script, [], tasks=3)
        configs.append(f"  - {{id: {name}, agent: {name}}}")
    launch.write_text(
        re.sub(
            r"configs:\n.*?\ntasks:",
            "configs:\n" + "\n".join(configs) + "\ntasks:",
            launch.read_text(),
            flags=re.S,
        )
    )
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    table = {row["config_id"]: row for row in json.loads(out)["config_table"]}
    for name in EARLY_EXIT:
        assert table[name]["score_checks"] == 0.0, (name, table[name])
        assert table[name]["scored_checks"] == 3, (name, table[name])
    from bench_pipeline.warehouse.store import Warehouse

    reasons = Warehouse(bench_home / "warehouse").read("scores")["reason"]
    assert reasons.str.contains("the grader did not finish").all()


FINISHING_GRADERS = {
    # each finishes by itself, then something still prints: the mark is not the last line
    "atexit": "import atexit\natexit.register(print, 'printed at exit')\nprint('PASS')\n",
    "thread": "import threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.2), print('late'))).start()\nprint('PASS')\n",
    # exits through the standard library's frames, not the workspace's
    "unittest": "import unittest\n\nclass T(unittest.TestCase):\n    def test(self):\n"
    "        pass\n\nunittest.main()\n",
    "no-newline": "import sys\nsys.stdout.write('PASS')\nsys.exit(0)\n",
}


def test_a_grader_that_finishes_keeps_its_pass_and_its_output(tmp_path: Path) -> None:
    from bench_pipeline.trials.completion import finished, launch
    from bench_pipeline.workspace.process import grader_env, run_command

    ws = tmp_path / "ws"
    ws.mkdir()
    for name, code in FINISHING_GRADERS.items():
        script = tmp_path / f"grader_{name}.py"
        script.write_text(code)
        launched = launch(["python", str(script)], ws)
        assert launched is not None, name
        argv, mark = launched
        raw = run_command(argv, ws, grader_env(tmp_path, ()), 60, stdin_text=mark + "\n")
        result, done = finished(raw, ["python", str(script)], mark)
        assert (result.exit_code, done) == (0, True), (name, raw.output)
        assert mark not in result.output and result.argv == ["python", str(script)]
    assert result.output == "PASS"  # (no-newline: the grader's output as it printed it)
    # The repository's own script (the agent can change it: nothing to guard), and forms the
    # launcher does not take, run as they are.
    (ws / "runtests.py").write_text("print('ok')\n")
    assert launch(["python", "runtests.py"], ws) is None
    assert launch(["python", str(ws / "runtests.py")], ws) is None
    assert launch(["python", "-u", str(tmp_path / "grader_atexit.py")], ws) is None


def test_a_code_the_check_did_not_declare_is_the_graders_word_only_if_it_finished(
    tmp_path: Path,
) -> None:
    """Exit 3 from the grader's own `sys.exit` is its fault (inconclusive, unscored); exit 3
    from `os._exit` in the code under test it imports is the agent's failure."""
    from bench_pipeline.formats.model import Check
    from bench_pipeline.trials.runner import check_reason, execute_check

    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    grader = tmp_path / "grader.py"
    grader.write_text("import sys\nsys.path.insert(0, '.')\nimport pkg\nsys.exit(3)\n")
    check = Check(id="c", description="", command=("python", str(grader)), files=())
    result, status = execute_check(check, tmp_path, ws, tmp_path)
    assert (result.exit_code, status) == (3, "inconclusive"), result.output
    assert "grader fault" in check_reason(check, result, status)
    (ws / "pkg" / "__init__.py").write_text("import os\nos._exit(3)\n")
    result, status = execute_check(check, tmp_path, ws, tmp_path)
    assert (result.exit_code, status) == (3, "failed"), result.output
    assert "the grader did not finish" in check_reason(check, result, status)
    # The grader's own code as its process ends with it: sys.exit(-1) is exit 255, its word
    # (a fault of the grader), not a grader the code under test ended.
    (ws / "pkg" / "__init__.py").write_text("")
    grader.write_text("import sys\nsys.path.insert(0, '.')\nimport pkg\nsys.exit(-1)\n")
    result, status = execute_check(check, tmp_path, ws, tmp_path)
    assert (result.exit_code, status) == (255, "inconclusive"), result.output
    assert "grader fault" in check_reason(check, result, status)


HOME_WRITER = """
import os, pathlib
pathlib.Path(os.environ["HOME"], "from-agent.txt").write_text("the agent was here")
"""
HOME_CHECK = (
    "import os, sys; h = os.environ['HOME']; "
    "sys.exit(0 if os.path.isfile(os.path.join(h, 'tool', 'config'))"
    " and not os.path.exists(os.path.join(h, 'from-agent.txt')) else 1)"
)


def test_graders_get_the_home_prepare_left_and_nothing_the_agent_put_there(
    factory: Path, bench_home: Path
) -> None:
    """What the suite's prepare installs into the trial's HOME (a `pip install --user`, a
    tool's config) is there for the graders, in a fresh home of their own that holds nothing
    an attempt of the agent wrote into its home."""
    suite = factory / "benchmarks/invoices/suite.yaml"
    prepare = json.dumps(
        [
            [
                "python",
                "-c",
                "import os, pathlib; p = pathlib.Path(os.environ['HOME'], 'tool'); "
                "p.mkdir(); (p / 'config').write_text('set up')",
            ]
        ]
    )
    suite.write_text(
        suite.read_text().replace("prepare_commands: []", f"prepare_commands: {prepare}")
    )
    launch = _command_launch(factory, "homewriter", HOME_WRITER, [], tasks=1)
    (task_file,) = [
        p
        for p in (factory / "benchmarks/invoices/tasks").glob("*.yaml")
        if p.stem in launch.read_text()
    ]
    task_file.write_text(
        task_file.read_text().replace(
            "checks:\n",
            "checks:\n  - id: HOME\n    description: the graders' home\n"
            f"    command: [python, -c, {json.dumps(HOME_CHECK)}]\n",
            1,
        )
    )
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    (trial,) = _trials(bench_home)
    assert trial["outcome"] == "succeeded", trial["error"]
    (checks_file,) = (bench_home / "evidence").rglob("homewriter/rep1/checks.json")
    home_check = next(c for c in json.loads(checks_file.read_text()) if c["id"] == "HOME")
    assert home_check["status"] == "passed", home_check
