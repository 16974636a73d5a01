"""The `ci` scorer, the push to `bench/**` branches and the CI sensor, end to end.

A local bare repository is the CI remote; a ScriptedServer on 127.0.0.1 speaks the GitHub
checks API (ETags, 304, rate-limit headers) and counts the requests per commit.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from bench_pipeline.defs.definitions import defs
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.ops.ci_poll import CI_RESCORE_ID
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.ci_push import (
    CIPushError,
    check_branch,
    display_remote,
    push_commit,
    resolve_remote,
    trial_branch,
)
from bench_pipeline.runs.execute import execute_partition
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.runs.score import score_partition
from bench_pipeline.runs.start import start_run
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer

REPO = "acme/invoices"
TOKEN_ENV = "BENCH_TEST_GH_TOKEN"
TASKS = ("amount-precision", "currency-code")
OK = {"status": "completed", "conclusion": "success", "latest_check_runs_count": 2}
BAD = {"status": "completed", "conclusion": "failure", "latest_check_runs_count": 1}
RUNNING = {"status": "in_progress", "conclusion": None, "latest_check_runs_count": 1}


class FakeChecks:
    """GET /repos/acme/invoices/commits/<sha>/check-suites with ETags and rate-limit headers."""

    def __init__(self) -> None:
        self.suites: dict[str, list[dict[str, Any]]] = {}
        self.counts: Counter[str] = Counter()
        self.conditional: Counter[str] = Counter()
        self.rate_limited_until: float | None = None
        self.auth: set[str] = set()

    def set(self, sha: str, *suites: dict[str, Any]) -> None:
        self.suites[sha] = [
            {"id": i + 1, "app": {"slug": f"app{i + 1}"}, **s} for i, s in enumerate(suites)
        ]

    def __call__(self, rec: Recorded) -> Reply:
        m = re.match(rf"^/repos/{REPO}/commits/([0-9a-f]{{40}})/check-suites", rec.path)
        if rec.method != "GET" or not m:
            return Reply(404, {"message": "Not Found"})
        sha = m.group(1)
        self.counts[sha] += 1
        headers = {k.lower(): v for k, v in rec.headers.items()}
        self.auth.add(headers.get("authorization", ""))
        if self.rate_limited_until is not None:
            reset = str(int(self.rate_limited_until))
            return Reply(
                403,
                {"message": "API rate limit exceeded"},
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
            )
        suites = self.suites.get(sha, [])
        etag = f'W/"{abs(hash(json.dumps(suites, sort_keys=True)))}"'
        rate = {"x-ratelimit-remaining": "4999", "x-ratelimit-reset": str(int(time.time()) + 3600)}
        if headers.get("if-none-match") == etag:
            self.conditional[sha] += 1
            return Reply(304, "", {"etag": etag, **rate})
        return Reply(
            200, {"total_count": len(suites), "check_suites": suites}, {"etag": etag, **rate}
        )


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture()
def remote(example: Path, tmp_path: Path) -> Path:
    """A bare repository standing for the CI remote, with the default branch `main`."""
    bare = tmp_path / "ci-remote.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    git("push", "--quiet", str(bare), "main:refs/heads/main", cwd=example / "service-repo")
    return bare


def branches(bare: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads", cwd=bare)
    return dict(line.split() for line in out.splitlines())


def write_launch(factory: Path, remote: Path, api_url: str, timeout: float = 3600) -> Path:
    path = factory / "launches" / "ci-test.yaml"
    path.write_text(
        "kind: BenchmarkLaunch\n"
        "suite: invoices\n"
        "configs:\n  - {id: reference, agent: reference}\n"
        "repetitions: 1\n"
        f"tasks: [{', '.join(TASKS)}]\n"
        "scorers: [checks, ci]\n"
        "max_parallel: 2\n"
        "ci:\n"
        f"  remote: {remote}\n"
        f"  repo: {REPO}\n"
        f"  api_url: {api_url}\n"
        f"  token_env: {TOKEN_ENV}\n"
        f"  timeout_seconds: {timeout}\n"
    )
    return path


def run_launch(launch: Path, home: Path) -> tuple[BenchmarkRun, BenchPaths]:
    paths = BenchPaths.from_home(home)
    run = start_run(launch, paths)
    for config_id, rep in run.partitions():
        execute_partition(run, config_id, rep, paths)
        score_partition(run, config_id, rep, paths)
    return run, paths


def latest_ci(paths: BenchPaths, run_id: str) -> dict[str, dict[str, Any]]:
    scores = paths.warehouse.read("scores", run_id, where="scorer = 'ci'")
    last = scores.sort_values("scored_at", kind="stable").drop_duplicates("trial_id", keep="last")
    return {r["trial_id"]: r for r in last.to_dict("records")}


def pushed_shas(paths: BenchPaths, run_id: str) -> dict[str, str]:
    trials = paths.warehouse.read("trials", run_id)
    out = {}
    for row in trials.to_dict("records"):
        meta = json.loads((Path(row["evidence_dir"]) / "metadata.json").read_text())
        out[row["trial_id"]] = meta["finalize"]["ci"]["sha"]
    return out


SENSOR = defs.get_repository_def().get_sensor_def("bench_ci_checks")


def tick(home: Path, instance: dg.DagsterInstance, cursor: str | None) -> Any:
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"bench": BenchResource(home=str(home))}
    )
    return SENSOR.evaluate_tick(context)


def test_ci_scores_follow_the_checks_api(
    example: Path, remote: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "test-token")
    fake = FakeChecks()
    main_before = branches(remote)["main"]
    with ScriptedServer(fake) as server, dg.instance_for_test() as instance:
        launch = write_launch(example / "factory", remote, server.url, timeout=3600)
        run, paths = run_launch(launch, bench_home)

        # Pushed to bench/<run>/<trial> only; the default branch is untouched.
        shas = pushed_shas(paths, run.run_id)
        heads = branches(remote)
        assert heads["main"] == main_before
        assert set(heads) == {"main"} | {trial_branch(run.run_id, t) for t in shas}
        for trial_id, sha in shas.items():
            assert heads[trial_branch(run.run_id, trial_id)] == sha
            assert trial_branch(run.run_id, trial_id).startswith(f"bench/{run.run_id}/")

        # Initial scoring: missing, "CI pending".
        initial = latest_ci(paths, run.run_id)
        assert {r["status"] for r in initial.values()} == {"missing"}
        assert {r["reason"] for r in initial.values()} == {"CI pending"}
        a, b = sorted(shas)

        # Tick 1: one commit still running, the other has no suite yet -> no score change.
        fake.set(shas[a], OK, RUNNING)
        result = tick(bench_home, instance, None)
        assert fake.counts[shas[a]] == 1 and fake.counts[shas[b]] == 1
        assert fake.auth == {"Bearer test-token"}
        assert all(r["status"] == "missing" for r in latest_ci(paths, run.run_id).values())

        # Tick 2: unchanged answers come back as 304 (the ETag was sent).
        result = tick(bench_home, instance, result.cursor)
        assert fake.conditional[shas[a]] == 1 and fake.conditional[shas[b]] == 1

        # Tick 3: a succeeds, b fails. (With the config partition known to the instance, the
        # sensor also reports the scores partition it appended to.)
        instance.add_dynamic_partitions("bench_config", [f"{run.suite}:reference"])
        fake.set(shas[a], OK, {**OK, "conclusion": "neutral"})
        fake.set(shas[b], OK, BAD)
        result = tick(bench_home, instance, result.cursor)
        (event,) = result.asset_events
        assert (
            event.asset_key == dg.AssetKey("scores")
            and event.partition == f"{run.suite}:reference|1"
        )
        latest = latest_ci(paths, run.run_id)
        assert latest[a]["status"] == "scored" and latest[a]["value"] == 1.0
        assert latest[b]["status"] == "scored" and latest[b]["value"] == 0.0
        assert latest[a]["rescore_id"] == CI_RESCORE_ID
        assert "app2: failure" in latest[b]["reason"]
        # History is kept: the initial missing rows are still there.
        all_rows = paths.warehouse.read("scores", run.run_id, where="scorer = 'ci'")
        assert len(all_rows) == 4

        # The sensor restarted with its cursor asks nothing more about finished commits.
        counts = dict(fake.counts)
        for _ in range(2):
            result = tick(bench_home, instance, result.cursor)
        assert dict(fake.counts) == counts
        assert run.run_id in json.loads(result.cursor)["done_runs"]
        # Even with a lost cursor the warehouse says the results are final.
        tick(bench_home, instance, None)
        assert dict(fake.counts) == counts
        assert len(paths.warehouse.read("scores", run.run_id, where="scorer = 'ci'")) == 4

        # A rescore of the ci scorer now finds the result in the evidence.
        rows = score_partition(
            run, "reference", 1, paths, scorer_specs=["ci"], only_unscored=False, rescore_id="r2"
        )
        assert {r["trial_id"]: r["value"] for r in rows} == {a: 1.0, b: 0.0}


def test_late_result_after_timeout_still_updates_the_score(
    example: Path, remote: Path, bench_home: Path
) -> None:
    fake = FakeChecks()
    with ScriptedServer(fake) as server, dg.instance_for_test() as instance:
        launch = write_launch(example / "factory", remote, server.url, timeout=1)
        run, paths = run_launch(launch, bench_home)
        shas = pushed_shas(paths, run.run_id)
        a, b = sorted(shas)
        time.sleep(1.2)  # past ci.timeout_seconds with no CI result
        fake.set(shas[a], RUNNING)
        result = tick(bench_home, instance, None)
        latest = latest_ci(paths, run.run_id)
        assert {r["status"] for r in latest.values()} == {"missing"}
        assert all("past ci.timeout_seconds" in r["reason"] for r in latest.values())
        # The timeout is recorded once, not on every tick.
        result = tick(bench_home, instance, result.cursor)
        assert len(paths.warehouse.read("scores", run.run_id, where="scorer = 'ci'")) == 4

        # A late result still lands.
        fake.set(shas[a], OK)
        fake.set(shas[b], BAD)
        result = tick(bench_home, instance, result.cursor)
        latest = latest_ci(paths, run.run_id)
        assert (latest[a]["status"], latest[a]["value"]) == ("scored", 1.0)
        assert (latest[b]["status"], latest[b]["value"]) == ("scored", 0.0)
        counts = dict(fake.counts)
        tick(bench_home, instance, result.cursor)
        assert dict(fake.counts) == counts


def test_rate_limit_skips_ticks_until_reset(example: Path, remote: Path, bench_home: Path) -> None:
    fake = FakeChecks()
    with ScriptedServer(fake) as server, dg.instance_for_test() as instance:
        launch = write_launch(example / "factory", remote, server.url)
        run, paths = run_launch(launch, bench_home)
        shas = pushed_shas(paths, run.run_id)
        fake.rate_limited_until = time.time() + 3600
        result = tick(bench_home, instance, None)
        assert sum(fake.counts.values()) == 1  # stopped at the first 403 with remaining 0
        assert json.loads(result.cursor)["rate_reset"] == int(fake.rate_limited_until)
        result = tick(bench_home, instance, result.cursor)
        assert sum(fake.counts.values()) == 1  # this tick is skipped entirely
        assert "rate limit" in (result.skip_message or "")
        # Once the reset time has passed, polling resumes.
        cursor = json.loads(result.cursor) | {"rate_reset": time.time() - 1}
        fake.rate_limited_until = None
        for sha in shas.values():
            fake.set(sha, OK)
        tick(bench_home, instance, json.dumps(cursor))
        assert {r["value"] for r in latest_ci(paths, run.run_id).values()} == {1.0}


def test_pushes_only_to_bench_branches(example: Path, remote: Path, tmp_path: Path) -> None:
    for bad in ("main", "refs/heads/main", "feature/x", "bench/", "bench/../main", "benchx/y"):
        with pytest.raises(CIPushError):
            check_branch(bad, "main")
    with pytest.raises(CIPushError):
        check_branch("bench/default", "bench/default")
    assert check_branch("bench/r1/t/c/1") == "bench/r1/t/c/1"
    assert trial_branch("run 1", "task/cfg/2") == "bench/run-1/task/cfg/2"
    # Nothing reaches git for a refused branch: the remote's heads are unchanged.
    work = tmp_path / "work"
    git("clone", "--quiet", str(example / "service-repo"), str(work))
    before = branches(remote)
    with pytest.raises(CIPushError):
        push_commit(work, str(remote), "main")
    assert branches(remote) == before


def test_remote_paths_resolve_against_the_launch_folder(tmp_path: Path) -> None:
    assert resolve_remote("../ci.git", tmp_path / "launches") == str(
        tmp_path / "launches/../ci.git"
    )
    assert resolve_remote("git@github.com:acme/x.git", tmp_path) == "git@github.com:acme/x.git"
    url = "https://user:secret@github.com/acme/x.git"
    assert resolve_remote(url, tmp_path) == url
    assert display_remote(url) == "https://github.com/acme/x.git"


def test_ci_scorer_not_scored_without_push(example: Path, bench_home: Path) -> None:
    """A launch with a `ci:` remote that cannot be pushed to: the trial is kept, ci is not
    scored with the push error as the reason."""
    launch = write_launch(example / "factory", example / "no-such-remote.git", "http://127.0.0.1:9")
    run, paths = run_launch(launch, bench_home)
    latest = latest_ci(paths, run.run_id)
    assert {r["status"] for r in latest.values()} == {"not_scored"}
    assert all("not pushed for CI" in r["reason"] for r in latest.values())
    trials = paths.warehouse.read("trials", run.run_id)
    assert set(trials["outcome"]) == {"succeeded"}
