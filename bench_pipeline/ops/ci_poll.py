"""The `ci` score of pushed trials, from the GitHub checks API (what the CI sensor runs).

A pushed trial's evidence (`metadata.json` -> `finalize.ci`) names its commit, branch and push
time. Each poll:

- skips everything while the API's rate limit is exhausted (until `x-ratelimit-reset`);
- asks for the check suites of every pushed commit whose result is not final yet, sending the
  last ETag (`If-None-Match`; 304 = unchanged);
- on success/failure appends a `ci` score row (1/0, `rescore_id = ci-sensor`) and writes
  `ci.json` into the trial's evidence, so a later rescore by the `ci` scorer finds the result;
- when a commit is still pending `ci.timeout_seconds` after its push, appends one `missing`
  row saying so, and keeps polling: a late result still appends the real score.

Rows are only ever appended; readers take the newest row per trial x scorer by `scored_at`.
The cursor (JSON) keeps ETags, the commits whose result is final, the timeouts already
recorded and the runs with nothing left to poll, so a restarted sensor sends no request for
a finished commit. The warehouse is the fallback: a trial whose newest `ci` row is a score for
the same commit is final even with a lost cursor.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pipeline.formats.files import replace_text
from bench_pipeline.ops.github import FAILURE, PENDING, SUCCESS, ChecksClient, summarize, verdict
from bench_pipeline.runs.benchmark_run import BenchmarkRun, load_run
from bench_pipeline.scorers.base import SCORE_SCORED, ScoreResult
from bench_pipeline.scorers.ci import (
    CI_RESULT_FILE,
    CI_SCORER,
    final_result,
    pending_result,
    push_info,
    when,
)
from bench_pipeline.warehouse.store import Warehouse

log = logging.getLogger(__name__)

CI_RESCORE_ID = "ci-sensor"
# After this long past its timeout a commit that never reported is no longer polled.
GIVE_UP_AFTER_SECONDS = 7 * 24 * 3600
MAX_REQUESTS_PER_TICK = 200


# --------------------------------------------------------------------------- cursor


@dataclass
class CICursor:
    etags: dict[str, str] = field(default_factory=dict)  # sha -> ETag of its last answer
    final: dict[str, dict[str, str]] = field(default_factory=dict)  # run -> trial -> sha
    timed_out: dict[str, dict[str, str]] = field(default_factory=dict)  # run -> trial -> sha
    done_runs: list[str] = field(default_factory=list)  # every trial final: never read again
    rate_reset: float | None = None  # epoch seconds: no request before

    @classmethod
    def from_json(cls, raw: str | None) -> CICursor:
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError:
            log.warning("ci sensor: unreadable cursor ignored")
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def is_final(self, run_id: str, trial_id: str, sha: str) -> bool:
        return self.final.get(run_id, {}).get(trial_id) == sha


@dataclass
class PollReport:
    requests: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)  # score rows appended
    changed_runs: set[str] = field(default_factory=set)
    pending: int = 0
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None  # why no request was sent at all

    @property
    def partitions(self) -> set[tuple[str, str, int]]:
        """(run_id, config_id, repetition) of every row appended."""
        return {(r["run_id"], r["config_id"], int(r["repetition"])) for r in self.rows}


# --------------------------------------------------------------------------- polling


@dataclass
class _Pushed:
    run: BenchmarkRun
    trial: dict[str, Any]  # the trial row
    push: dict[str, Any]

    @property
    def trial_id(self) -> str:
        return str(self.trial["trial_id"])

    @property
    def sha(self) -> str:
        return str(self.push["sha"])


def ci_runs(warehouse: Warehouse, skip: set[str]) -> list[str]:
    """Runs whose launch scores `ci`, oldest first, except `skip`."""
    runs = warehouse.read_runs()
    if runs.empty:
        return []
    out = []
    for row in runs.sort_values("created_at").itertuples():
        if row.run_id in skip:
            continue
        try:
            scorers = json.loads(row.scorers_json or "[]")
        except ValueError:
            continue
        if CI_SCORER in scorers:
            out.append(str(row.run_id))
    return out


def _latest_ci_rows(warehouse: Warehouse, run_id: str) -> dict[str, dict[str, Any]]:
    scores = warehouse.read("scores", run_id, where=f"scorer = '{CI_SCORER}'")
    if scores.empty:
        return {}
    scores = scores.sort_values("scored_at", kind="stable")
    last = scores.drop_duplicates("trial_id", keep="last")
    return {str(r["trial_id"]): r for r in last.to_dict("records")}


def _row_sha(row: dict[str, Any]) -> str | None:
    try:
        return json.loads(row.get("details_json") or "{}").get("sha")
    except ValueError:
        return None


def poll_ci(
    warehouse: Warehouse,
    cursor: CICursor,
    *,
    now: datetime | None = None,
    environ: dict[str, str] | None = None,
    client_factory: Callable[[str, str | None], ChecksClient] = ChecksClient,
) -> PollReport:
    """One sensor tick: poll what is pending, append score rows, update `cursor` in place."""
    now = now or datetime.now(UTC)
    env = dict(environ if environ is not None else os.environ)
    report = PollReport()
    if cursor.rate_reset is not None and now.timestamp() < cursor.rate_reset:
        report.skipped = (
            "GitHub rate limit exhausted until "
            f"{datetime.fromtimestamp(cursor.rate_reset, UTC).isoformat()}"
        )
        return report
    cursor.rate_reset = None

    clients: dict[tuple[str, str], ChecksClient] = {}
    replies: dict[tuple[str, str, str], Any] = {}  # one request per commit per tick
    try:
        for run_id in ci_runs(warehouse, set(cursor.done_runs)):
            if not _poll_run(warehouse, run_id, cursor, report, now, env, clients, replies):
                break  # rate limited: nothing more this tick
    finally:
        for client in clients.values():
            client.close()
    _write_rows(warehouse, report.rows, now)
    return report


def _poll_run(
    warehouse: Warehouse,
    run_id: str,
    cursor: CICursor,
    report: PollReport,
    now: datetime,
    env: dict[str, str],
    clients: dict[tuple[str, str], ChecksClient],
    replies: dict[tuple[str, str, str], Any],
) -> bool:
    """Poll one run's pending commits; False when the rate limit stops the tick."""
    try:
        run = load_run(run_id, warehouse)
    except (OSError, ValueError, KeyError) as exc:
        report.errors.append(f"{run_id}: cannot load the run manifest: {exc}")
        return True
    ci = run.launch.ci
    if ci is None:
        cursor.done_runs.append(run_id)
        return True
    from bench_pipeline.results.scores import latest_trials  # the results load when polled

    trials = latest_trials(warehouse.read("trials", run_id))
    latest = _latest_ci_rows(warehouse, run_id)
    expected = len(run.taskset.tasks) * len(run.launch.configs) * run.repetitions
    all_final = len(trials) >= expected
    token = env.get(ci.token_env) or None
    for trial in trials.to_dict("records"):
        metadata_path = Path(trial["evidence_dir"]) / "metadata.json"
        try:
            metadata = json.loads(metadata_path.read_text())
        except (OSError, ValueError):
            continue
        push = push_info(metadata)
        if push is None:
            continue
        item = _Pushed(run, trial, push)
        if cursor.is_final(run_id, item.trial_id, item.sha):
            continue
        row = latest.get(item.trial_id)
        if row is not None and row.get("status") == SCORE_SCORED and _row_sha(row) == item.sha:
            cursor.final.setdefault(run_id, {})[item.trial_id] = item.sha  # lost cursor
            continue
        waited = (now - when(push["pushed_at"])).total_seconds()
        if waited > ci.timeout_seconds + GIVE_UP_AFTER_SECONDS:
            log.warning("ci: giving up on %s %s after %.0fs", run_id, item.trial_id, waited)
            cursor.final.setdefault(run_id, {})[item.trial_id] = item.sha
            continue
        if report.requests >= MAX_REQUESTS_PER_TICK:
            return False
        key = (ci.api_url, ci.repo, item.sha)
        reply = replies.get(key)
        if reply is None:
            client = clients.get((ci.api_url, ci.token_env))
            if client is None:
                if token is None:
                    log.warning(
                        "ci: %s is not set; asking the checks API anonymously", ci.token_env
                    )
                client = clients[(ci.api_url, ci.token_env)] = ChecksClient(ci.api_url, token)
            reply = client.check_suites(ci.repo, item.sha, cursor.etags.get(item.sha))
            replies[key] = reply
            report.requests += 1
            if reply.rate_limited:
                cursor.rate_reset = reply.rate_reset or now.timestamp() + 60.0
        state = PENDING
        if reply.status_code == 200:
            state = verdict(reply.suites)
            if reply.etag:
                cursor.etags[item.sha] = reply.etag
        elif not reply.not_modified:
            report.errors.append(f"{run_id} {item.trial_id} {item.sha[:10]}: {reply.error}")
        if state in (SUCCESS, FAILURE):
            record = {
                "sha": item.sha,
                "verdict": state,
                "suites": summarize(reply.suites),
                "checked_at": now.isoformat(),
                "source": CI_RESCORE_ID,
            }
            _write_evidence(Path(trial["evidence_dir"]), record)
            _append(report, trial, final_result(push, record))
            cursor.final.setdefault(run_id, {})[item.trial_id] = item.sha
            cursor.etags.pop(item.sha, None)
            cursor.timed_out.get(run_id, {}).pop(item.trial_id, None)
        else:
            all_final = False
            report.pending += 1
            timed = cursor.timed_out.setdefault(run_id, {})
            if waited > ci.timeout_seconds and timed.get(item.trial_id) != item.sha:
                _append(report, trial, pending_result(push, now))
                timed[item.trial_id] = item.sha
        if reply.rate_limited:  # this answer is used; the next request waits for the reset
            return False
    if all_final:
        cursor.done_runs.append(run_id)
        cursor.final.pop(run_id, None)
        cursor.timed_out.pop(run_id, None)
    if run_id in cursor.timed_out and not cursor.timed_out[run_id]:
        del cursor.timed_out[run_id]
    return True


def _append(report: PollReport, trial: dict[str, Any], result: ScoreResult) -> None:
    from bench_pipeline.runs.score import score_row

    report.rows.append(score_row(trial, result, CI_RESCORE_ID))
    report.changed_runs.add(str(trial["run_id"]))


def _write_evidence(folder: Path, record: dict[str, Any]) -> None:
    try:
        replace_text(folder / CI_RESULT_FILE, json.dumps(record, indent=2, default=str))
    except OSError as exc:  # the score row is the record; evidence is a convenience
        log.warning("ci: cannot write %s in %s: %s", CI_RESULT_FILE, folder, exc)


def _write_rows(warehouse: Warehouse, rows: list[dict[str, Any]], now: datetime) -> None:
    """One new file per partition and tick: history is appended, never rewritten."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["run_id"], row["config_id"], int(row["repetition"])), []).append(row)
    stamp = f"{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:6]}"
    for (run_id, config_id, rep), part_rows in groups.items():
        warehouse.write(
            "scores", part_rows, run_id, f"{config_id}/rep{rep}/{CI_RESCORE_ID}-{stamp}"
        )
