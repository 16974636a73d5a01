"""The workspace's `.git` is the agent's: the harness reads the workspace through a git folder of
its own. Before, `git add` and `git diff` for changes.patch ran on the host through the
workspace's own `.git`, so an agent's filter driver or `core.fsmonitor` ran any command outside
the sandbox with the harness's environment, a `.git` file made the harness stage the workspace
into another repository, and a deleted `.git` turned a failed trial into an unscored
workspace error."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.test_trial_isolation import _command_launch, _trials

# Each agent changes nothing the checks test (its trial must score 0, scored) and leaves one
# new file the patch must show. argv[1]: a folder outside the workspace; argv[2]: another
# repository on the same machine.
GIT_CONFIG = """
import pathlib, sys
sys.stdin.read()
out = sys.argv[1]
with open(".git/config", "a") as fh:
    fh.write('[filter "pwn"]\\n\\tclean = "sh -c \\'touch ' + out + '/filter-ran; cat\\'"\\n')
    fh.write('[diff "pwn"]\\n\\ttextconv = "sh -c \\'touch ' + out + '/textconv-ran; cat\\'"\\n')
    fh.write('[core]\\n\\tfsmonitor = "sh -c \\'touch ' + out + '/fsmonitor-ran\\'"\\n')
pathlib.Path(".gitattributes").write_text("* filter=pwn diff=pwn\\n")
pathlib.Path("AGENT_WAS_HERE.txt").write_text("gitconfig\\n")
"""
GIT_FILE = """
import pathlib, shutil, sys
sys.stdin.read()
shutil.rmtree(".git")
pathlib.Path(".git").write_text("gitdir: " + sys.argv[2] + "/.git\\n")
pathlib.Path("AGENT_WAS_HERE.txt").write_text("gitfile\\n")
"""
NO_GIT = """
import pathlib, shutil, sys
sys.stdin.read()
shutil.rmtree(".git")
pathlib.Path("AGENT_WAS_HERE.txt").write_text("nogit\\n")
"""
AGENTS = {"gitconfig": GIT_CONFIG, "gitfile": GIT_FILE, "nogit": NO_GIT}


def test_the_harness_never_runs_git_through_the_agents_git_folder(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = tmp_path / "victim"
    subprocess.run(["git", "init", "-q", str(victim)], check=True)
    (victim / "kept.txt").write_text("mine\n")
    subprocess.run(["git", "-C", str(victim), "add", "kept.txt"], check=True)
    staged_before = subprocess.run(
        ["git", "-C", str(victim), "status", "--porcelain"], capture_output=True, text=True
    ).stdout

    configs = []
    for name, script in AGENTS.items():
        launch = _command_launch(factory, name, script, [str(outside), str(victim)], tasks=1)
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

    assert sorted(p.name for p in outside.iterdir()) == []  # no driver ran, on the host or not
    staged_after = subprocess.run(
        ["git", "-C", str(victim), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert staged_after == staged_before  # nothing of the workspace was staged there
    trials = {t["config_id"]: t for t in _trials(bench_home)}
    table = {row["config_id"]: row for row in json.loads(out)["config_table"]}
    for name in AGENTS:
        assert trials[name]["outcome"] == "succeeded", trials[name]["error"]
        # the agent's change is in the patch, in its own bytes (no filter turned it)
        patch = next((bench_home / "evidence").glob(f"*/*/{name}/rep1/changes.patch"))
        assert f"+{name}" in patch.read_text(), patch.read_text()[:2000]
        # scored, and scored 0: the agent fixed nothing
        assert table[name]["scored_checks"] == 1 and table[name]["score_checks"] == 0.0


LOOK_AHEAD = """
import subprocess, sys
sys.stdin.read()
listed = subprocess.run(
    ["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"],
    capture_output=True, text=True, check=True,
).stdout.split()
history = subprocess.run(["git", "log", "--format=%H"], capture_output=True, text=True).stdout
if sys.argv[1] in listed:
    print("a commit after the base is readable in the workspace")
    sys.exit(3)
if sys.argv[2] not in history.split():
    print("the base's own history is missing")
    sys.exit(4)
"""


def test_a_workspace_holds_no_object_of_a_commit_after_its_base(
    example: Path, factory: Path, bench_home: Path
) -> None:
    """The workspace borrowed every object of the source repository: an agent could list them
    and read the commits after its base (a task drafted from an upstream fix: the fix itself
    and its tests)."""
    repo = example / "service-repo"

    def rev(ref: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True, check=True
        ).stdout.strip()

    later, base = rev("v1.1"), rev("v1.0")
    launch = _command_launch(factory, "lookahead", LOOK_AHEAD, [later, base], tasks=1)
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    (trial,) = _trials(bench_home)
    assert trial["task_id"] == "amount-precision"  # (a task at v1.0; v1.1 came after)
    assert trial["outcome"] == "succeeded", trial["error"]
    stores = list((bench_home / "cache" / "objects").iterdir())
    assert len(stores) == 1 and (stores[0] / "complete").is_file()


# A repository of the agent's own inside the workspace, with a filter driver in its config: git
# recorded it as a link to its commit, and indexing it again (the second attempt's, or the
# put-back after grading) ran `git status` in it with that config, on the host.
NESTED = """
import os, pathlib, subprocess, sys
sys.stdin.read()
out = sys.argv[1]
sub = pathlib.Path("vendor_sub")
if not sub.exists():
    subprocess.run(["git", "init", "-q", str(sub)], check=True)
    (sub / "f.txt").write_text("x\\n")
    git = ["git", "-C", str(sub), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    with open(sub / ".git" / "config", "a") as fh:
        fh.write('[filter "f"]\\n\\tclean = "sh -c \\'touch ' + out + '/nested-filter-ran; cat\\'"\\n')
    (sub / ".gitattributes").write_text("* filter=f\\n")
(sub / "f.txt").write_text(f"attempt {os.environ['BENCH_ATTEMPT']}\\n")
subprocess.run(["git", "init", "-q", "empty_sub"], check=True)  # (no commit: git add failed)
pathlib.Path(".gitattributes").write_text("*.py working-tree-encoding=UTF-16\\n")
pathlib.Path("AGENT_WAS_HERE.txt").write_text("nested\\n")
"""


def test_repositories_inside_the_workspace_run_nothing_and_fail_nothing(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    launch = _command_launch(factory, "nested", NESTED, [str(outside)], tasks=1)
    agent = factory / "agents" / "nested.yaml"
    agent.write_text(agent.read_text().replace("max_iterations: 1", "max_iterations: 2"))
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    assert sorted(p.name for p in outside.iterdir()) == []
    (trial,) = _trials(bench_home)
    # two attempts (the checks failed on the first), graded, not a workspace error
    assert trial["outcome"] == "succeeded" and trial["iterations"] == 2, trial["error"]
    (row,) = json.loads(out)["config_table"]
    assert row["scored_checks"] == 1 and row["score_checks"] == 0.0
    patch = next((bench_home / "evidence").glob("*/*/nested/rep1/changes.patch")).read_text()
    assert "+nested" in patch and "vendor_sub" not in patch
