"""`bench promote`: a new branch of the real factory repo, the working tree untouched, and a
pull request through a scripted GitHub API on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest
import yaml

from bench_pipeline.authoring.promote import github_repo, set_top_level
from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Reply, ScriptedServer

LAUNCH = """kind: BenchmarkLaunch
suite: invoices
tasks: [amount-precision]
configs:
  - {id: tuned, agent: reference, model: claude-opus-test, effort: high, skills: [../skills/testing.md]}
  - {id: pinned, agent: reference, factory_ref: main}
repetitions: 1
scorers: [checks]
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.slow
def test_promote_commits_on_a_new_branch_and_opens_a_pull_request(
    factory, bench_home, tmp_path, monkeypatch
):
    launch = factory / "launches" / "promo.yaml"
    launch.write_text(LAUNCH)
    code, out, err = run_bench("run", str(launch), "--quiet", "--json", home=bench_home)
    assert code == 0, err
    run_id = json.loads(out)["run"]["run_id"]

    # a GitHub remote whose pushes land in a local bare repository
    bare = tmp_path / "remote.git"
    _git(tmp_path, "init", "--bare", "-q", str(bare))
    _git(factory, "remote", "add", "origin", "https://github.com/acme/factory.git")
    _git(factory, "config", f"url.{bare}.pushInsteadOf", "https://github.com/acme/factory.git")

    # uncommitted work in the factory must survive
    agent_file = factory / "agents" / "reference.yaml"
    agent_file.write_text(agent_file.read_text() + "# local edit, not committed\n")
    status_before = _git(factory, "status", "--porcelain")
    head_before = _git(factory, "rev-parse", "HEAD")
    branch_before = _git(factory, "rev-parse", "--abbrev-ref", "HEAD")
    working_before = agent_file.read_text()

    code, _, err = run_bench("promote", run_id, "pinned", home=bench_home)
    assert code == 2
    assert err.count("\n") == 1 and "factory_ref" in err and "cannot be promoted" in err

    def github(rec):
        return Reply(201, {"html_url": "https://github.com/acme/factory/pull/7", "number": 7})

    with ScriptedServer(handler=github) as server:
        monkeypatch.setenv("GITHUB_TOKEN", "gh-test-token")
        monkeypatch.setenv("GITHUB_API_URL", server.url)
        code, out, err = run_bench(
            "promote", run_id, "tuned", "--tag", "validation", home=bench_home
        )
    assert code == 0, err
    branch = f"bench/promote/tuned-{run_id}"
    assert branch in out and "https://github.com/acme/factory/pull/7" in out

    repo = git.Repo(factory)
    commit = repo.commit(branch)
    assert commit.parents[0].hexsha == head_before
    promoted = yaml.safe_load((commit.tree / "agents/reference.yaml").data_stream.read())
    assert promoted["model"] == "claude-opus-test"
    assert promoted["effort"] == "high"
    assert promoted["skills"] == ["../skills/testing.md"]
    assert promoted["kind"] == "reference"  # the rest of the file is kept
    assert [d.a_path for d in commit.parents[0].diff(commit)] == ["agents/reference.yaml"]
    message = commit.message
    assert "all tasks" in message and "overall" in message and "pass rate" in message
    assert "avg cost" in message and "coverage" in message and "trials 1 (1 succeeded)" in message
    assert "tag validation" in message
    assert "claude-opus-test" in message

    # nothing of the current checkout moved
    assert _git(factory, "rev-parse", "HEAD") == head_before
    assert _git(factory, "rev-parse", "--abbrev-ref", "HEAD") == branch_before
    assert _git(factory, "status", "--porcelain") == status_before
    assert agent_file.read_text() == working_before

    # pushed, then the pull request asked for
    assert _git(bare, "rev-parse", f"refs/heads/{branch}") == commit.hexsha
    (req,) = server.requests
    assert req.method == "POST" and req.path == "/repos/acme/factory/pulls"
    assert req.headers.get("Authorization") == "Bearer gh-test-token"
    assert req.body["head"] == branch and req.body["base"] == branch_before
    assert req.body["title"].startswith("bench: promote tuned")
    assert "pass rate" in req.body["body"]

    # promoting again refuses: the branch exists
    code, _, err = run_bench("promote", run_id, "tuned", home=bench_home)
    assert code == 2 and "already exists" in err


def test_set_top_level_keeps_comments_and_other_keys():
    text = "# agent\nkind: anthropic\nmodel: a  # old\nskills:\n  - x.md\n\n  - y.md\ntools: [read_file]\n"
    out = set_top_level(set_top_level(text, "model", "b"), "skills", ["z.md"])
    assert out.startswith("# agent\nkind: anthropic\n")
    assert yaml.safe_load(out) == {
        "kind": "anthropic",
        "model": "b",
        "skills": ["z.md"],
        "tools": ["read_file"],
    }
    assert set_top_level("kind: noop", "effort", "low") == "kind: noop\neffort: low\n"


def test_github_remote_urls():
    assert github_repo("https://github.com/acme/factory.git") == ("acme", "factory")
    assert github_repo("git@github.com:acme/fac.tory.git") == ("acme", "fac.tory")
    assert github_repo("https://gitlab.com/acme/factory.git") is None
