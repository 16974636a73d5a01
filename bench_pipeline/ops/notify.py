"""Regression, recovery and run-failure notices to a suite's `notify` webhook.

The decision is pure (`regression_events`, `run_failed_event`): given a run's `regressions`
table and the suite's notification state, what to send and the new state. The state lives in
the warehouse as `notifications/<suite>.json`:

    {"suite": ..., "open": {"<config>|<metric>": {run_id, baseline_run_id, baseline, current,
      tolerance, notified_at, delivered}}, "last_run": {run_id, created_at}}

(failed runs already reported are kept apart, in `notifications/<suite>.failed_runs.json`, so
the regression and run-failure sensors never overwrite each other's state).

Rules:
- a regressed row whose (config, metric) has no open regression -> one `regression` notice,
  and the pair is open; later runs that are still regressed send nothing more (one notice per
  episode, not one per night);
- a judged, non-regressed row (no `note`) of an open pair -> one `recovery` notice; the pair
  closes. Rows that could not be judged (`note` set, e.g. cost coverage) change nothing, and
  neither do drops "within noise" (not significant: never alerted, never a recovery);
- a gated overall row's notice carries its evidence: `effect` (current - baseline, paired over
  tasks), `ci_low`/`ci_high` (95%), `p_value`, `alpha`, `verdict`, `tasks_compared` and the
  excluded `flaky_tasks`;
- a run created before the last run already evaluated (an old run's tables rebuilt) sends
  nothing and changes nothing; evaluating the same run again is a no-op.

Sending (`send_notification`) is an httpx POST of the JSON body with a few attempts and
exponential backoff; a failed send is logged and reported as False, never raised.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse

log = logging.getLogger(__name__)

REGRESSION, RECOVERY, RUN_FAILED = "regression", "recovery", "run_failed"
DEFAULT_UI_URL = "http://localhost:3000"
SEND_ATTEMPTS = 4
BACKOFF_SECONDS = 0.5  # 0.5, 1, 2 s between attempts
MAX_FAILED_RUNS_KEPT = 200

Sender = Callable[[str, dict[str, Any]], bool]


# --------------------------------------------------------------------------- links


def ui_base(environ: dict[str, str] | None = None) -> str:
    env = environ if environ is not None else os.environ
    return (env.get("BENCH_UI_URL") or DEFAULT_UI_URL).rstrip("/")


def run_link(dagster_run_id: str | None, environ: dict[str, str] | None = None) -> str:
    """The Dagster UI page of a run (the asset page of `regressions` when the run is unknown)."""
    base = ui_base(environ)
    return f"{base}/runs/{dagster_run_id}" if dagster_run_id else f"{base}/assets/regressions"


# --------------------------------------------------------------------------- decisions


def empty_state(suite: str) -> dict[str, Any]:
    return {"suite": suite, "open": {}, "last_run": None}


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _blank(value: Any) -> bool:
    """None, NaN, pandas NA or an empty string (what a Parquet null reads back as)."""
    if value is None or (isinstance(value, str) and not value):
        return True
    import pandas as pd  # Parquet nulls read back through a frame: pandas is already loaded

    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _true(value: Any) -> bool:
    return not _blank(value) and bool(value)


def _body(event: str, suite: str, row: dict[str, Any], link: str) -> dict[str, Any]:
    return {
        "event": event,
        "suite": suite,
        "config": row.get("config_id"),
        "metric": row.get("metric"),
        "baseline": _num(row.get("baseline")),
        "current": _num(row.get("current")),
        "tolerance": _num(row.get("tolerance")),
        "run_id": row.get("run_id"),
        "baseline_run_id": row.get("baseline_run_id"),
        "link": link,
    } | _evidence(row)


# The significance fields of a gated row (results/regressions.py); rows of older tables or of
# the cost metric lack them, and their notices stay as they were.
EVIDENCE = ("effect", "ci_low", "ci_high", "p_value", "alpha")


def _evidence(row: dict[str, Any]) -> dict[str, Any]:
    if all(_blank(row.get(k)) for k in EVIDENCE):
        return {}
    out: dict[str, Any] = {k: _num(row.get(k)) for k in EVIDENCE}
    out["verdict"] = None if _blank(row.get("verdict")) else row.get("verdict")
    out["tasks_compared"] = _num(row.get("tasks_compared"))
    flaky = row.get("flaky_tasks")
    out["flaky_tasks"] = [] if _blank(flaky) else [t.strip() for t in str(flaky).split(",")]
    return out


def regression_events(
    rows: Iterable[dict[str, Any]],
    state: dict[str, Any],
    *,
    suite: str,
    run_id: str,
    run_created_at: str,
    link: str,
    now: datetime | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The notices one run's regressions table calls for, and the suite's new state."""
    state = {**empty_state(suite), **state}
    state["open"] = dict(state.get("open") or {})
    last = state.get("last_run") or {}
    if last.get("created_at") and last.get("run_id") != run_id:
        if _when(run_created_at) < _when(last["created_at"]):
            return [], state  # an older run: the episode has moved on since
    stamp = (now or datetime.now(UTC)).isoformat()
    events: list[dict[str, Any]] = []
    ordered = sorted(
        (dict(r) for r in rows), key=lambda r: (str(r.get("config_id")), str(r.get("metric")))
    )
    for row in ordered:
        if row.get("run_id") not in (None, run_id):
            continue
        key = f"{row.get('config_id')}|{row.get('metric')}"
        regressed = _true(row.get("regressed"))
        if regressed:
            if key not in state["open"]:
                events.append(_body(REGRESSION, suite, row, link))
                state["open"][key] = {
                    "run_id": run_id,
                    "baseline_run_id": row.get("baseline_run_id"),
                    "baseline": _num(row.get("baseline")),
                    "current": _num(row.get("current")),
                    "tolerance": _num(row.get("tolerance")),
                    "notified_at": stamp,
                }
            else:
                state["open"][key] |= {"last_run_id": run_id, "current": _num(row.get("current"))}
        elif _blank(row.get("note")) and key in state["open"]:
            events.append(_body(RECOVERY, suite, row, link))
            del state["open"][key]
    state["last_run"] = {"run_id": run_id, "created_at": run_created_at}
    return events, state


def run_failed_event(
    *,
    suite: str | None,
    run_id: str | None,
    dagster_run_id: str,
    job_name: str,
    error: str | None,
    link: str,
) -> dict[str, Any]:
    """The body of a `run_failed` notice (config/metric/values are null)."""
    return {
        "event": RUN_FAILED,
        "suite": suite,
        "config": None,
        "metric": None,
        "baseline": None,
        "current": None,
        "tolerance": None,
        "run_id": run_id,
        "baseline_run_id": None,
        "link": link,
        "job": job_name,
        "dagster_run_id": dagster_run_id,
        "error": (error or "")[:2000] or None,
    }


def _when(value: str) -> datetime:
    when = datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


# --------------------------------------------------------------------------- sending


def send_notification(
    url: str,
    body: dict[str, Any],
    *,
    attempts: int = SEND_ATTEMPTS,
    backoff: float = BACKOFF_SECONDS,
    timeout: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """POST `body` as JSON; retry network errors, 408/429 and 5xx with exponential backoff.
    Returns whether the webhook accepted it (2xx). Never raises."""
    import httpx  # loaded when a webhook is sent, not with the definitions

    for attempt in range(1, attempts + 1):
        problem: str
        try:
            resp = httpx.post(url, json=body, timeout=timeout)
        except httpx.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a bad URL and the like: never crash the caller
            log.error("notify: cannot send %s to %s: %s", body.get("event"), url, exc)
            return False
        else:
            if resp.is_success:
                return True
            problem = f"HTTP {resp.status_code}"
            if resp.status_code not in (408, 429) and resp.status_code < 500:
                log.error("notify: %s refused the %s notice: %s", url, body.get("event"), problem)
                return False
        if attempt < attempts:
            sleep(backoff * 2 ** (attempt - 1))
    log.error(
        "notify: giving up on the %s notice to %s after %d attempts: %s",
        body.get("event"),
        url,
        attempts,
        problem,
    )
    return False


# --------------------------------------------------------------------------- state + glue


def load_state(warehouse: Warehouse, suite: str) -> dict[str, Any]:
    rel = layout.notification_state(suite)
    if not warehouse.exists(rel):
        return empty_state(suite)
    try:
        return {**empty_state(suite), **warehouse.read_json(rel)}
    except (OSError, ValueError):
        log.warning("notify: unreadable %s; starting from an empty state", rel)
        return empty_state(suite)


def notify_run(
    warehouse: Warehouse,
    run_id: str,
    *,
    dagster_run_id: str | None = None,
    environ: dict[str, str] | None = None,
    send: Sender = send_notification,
) -> list[dict[str, Any]]:
    """Evaluate one run's stored `regressions` table, send what it calls for to the suite's
    webhook, store the new state. Returns the notices decided (sent or not)."""
    from bench_pipeline.runs.benchmark_run import load_run

    run = load_run(run_id, warehouse)
    suite = run.suite
    table = warehouse.read("regressions", run_id)
    rows = table.to_dict("records") if not table.empty else []
    state = load_state(warehouse, suite)
    events, state = regression_events(
        rows,
        state,
        suite=suite,
        run_id=run_id,
        run_created_at=run.created_at,
        link=run_link(dagster_run_id, environ),
    )
    url = run.launch.suite.notify
    for event in events:
        delivered = bool(url) and send(url, event)
        if not url:
            log.warning("notify: suite %s has no `notify` webhook; %s not sent", suite, event)
        key = f"{event['config']}|{event['metric']}"
        if event["event"] == REGRESSION and key in state["open"]:
            state["open"][key]["delivered"] = delivered
    warehouse.write_json(layout.notification_state(suite), state)
    return events


def notify_run_failure(
    warehouse: Warehouse,
    *,
    suite: str | None,
    url: str | None,
    run_id: str | None,
    dagster_run_id: str,
    job_name: str,
    error: str | None,
    environ: dict[str, str] | None = None,
    send: Sender = send_notification,
) -> dict[str, Any] | None:
    """Report one failed Dagster run once (the reported run ids are kept per suite)."""
    rel = layout.reported_failed_runs(suite)
    reported: list[str] = []
    if warehouse.exists(rel):
        try:
            reported = list(warehouse.read_json(rel).get("failed_runs") or [])
        except (OSError, ValueError, AttributeError):
            reported = []
    if dagster_run_id in reported:
        return None
    event = run_failed_event(
        suite=suite,
        run_id=run_id,
        dagster_run_id=dagster_run_id,
        job_name=job_name,
        error=error,
        link=run_link(dagster_run_id, environ),
    )
    if url:
        send(url, event)
    else:
        log.warning("notify: no webhook for the failed run %s (suite %s)", dagster_run_id, suite)
    reported = [*reported, dagster_run_id][-MAX_FAILED_RUNS_KEPT:]
    warehouse.write_json(rel, {"suite": suite, "failed_runs": reported})
    return event
