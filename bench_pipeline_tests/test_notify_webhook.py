"""What to notify (pure decisions over a regressions table and the suite's state) and how it
is sent (httpx with retries and backoff against a local webhook; failures never raise)."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from bench_pipeline.ops.notify import (
    RECOVERY,
    REGRESSION,
    empty_state,
    regression_events,
    run_link,
    send_notification,
)
from bench_pipeline_tests.http_fakes import Reply, ScriptedServer

LINK = "http://localhost:3000/runs/abc"


def row(run_id: str, regressed: bool, current: float, metric: str = "overall", **kw: Any):
    return {
        "suite": "invoices",
        "run_id": run_id,
        "baseline_run_id": "base",
        "config_id": kw.pop("config_id", "sonnet"),
        "metric": metric,
        "baseline": 0.9,
        "current": current,
        "tolerance": 0.05,
        "regressed": regressed,
        "note": kw.pop("note", None),
    }


def decide(rows, state, run_id: str, created: str):
    return regression_events(
        rows, state, suite="invoices", run_id=run_id, run_created_at=created, link=LINK
    )


def test_one_notice_per_episode_then_recovery() -> None:
    state = empty_state("invoices")
    events, state = decide([row("r1", False, 0.9)], state, "r1", "2026-01-01T02:00:00+00:00")
    assert events == []  # within tolerance and nothing open: silence

    events, state = decide([row("r2", True, 0.8)], state, "r2", "2026-01-02T02:00:00+00:00")
    assert [e["event"] for e in events] == [REGRESSION]
    assert events[0] == {
        "event": "regression",
        "suite": "invoices",
        "config": "sonnet",
        "metric": "overall",
        "baseline": 0.9,
        "current": 0.8,
        "tolerance": 0.05,
        "run_id": "r2",
        "baseline_run_id": "base",
        "link": LINK,
    }
    # The same run evaluated again (results rebuilt): nothing new.
    again, state = decide([row("r2", True, 0.8)], state, "r2", "2026-01-02T02:00:00+00:00")
    assert again == []
    # Still regressed the next night: still one notice for the episode.
    events, state = decide([row("r3", True, 0.7)], state, "r3", "2026-01-03T02:00:00+00:00")
    assert events == []
    # A row that could not be judged (note) neither recovers nor regresses.
    events, state = decide(
        [row("r4", False, None, note="overall unavailable on one side")],
        state,
        "r4",
        "2026-01-04T02:00:00+00:00",
    )
    assert events == [] and "sonnet|overall" in state["open"]
    # An older run rebuilt later changes nothing.
    events, state = decide([row("r0", False, 0.9)], state, "r0", "2025-12-31T02:00:00+00:00")
    assert events == [] and "sonnet|overall" in state["open"]
    # Back within tolerance: one recovery, the episode closes.
    events, state = decide([row("r5", False, 0.9)], state, "r5", "2026-01-05T02:00:00+00:00")
    assert [(e["event"], e["run_id"], e["current"]) for e in events] == [(RECOVERY, "r5", 0.9)]
    assert state["open"] == {}
    events, state = decide([row("r6", False, 0.9)], state, "r6", "2026-01-06T02:00:00+00:00")
    assert events == []


def test_metrics_and_configs_are_tracked_apart() -> None:
    rows = [
        row("r1", True, 0.5),
        row("r1", True, 2.0, metric="cost"),
        row("r1", False, 0.9, config_id="haiku"),
    ]
    events, state = decide(rows, empty_state("invoices"), "r1", "2026-01-01T02:00:00+00:00")
    assert sorted((e["config"], e["metric"]) for e in events) == [
        ("sonnet", "cost"),
        ("sonnet", "overall"),
    ]
    events, state = decide(
        [row("r2", False, 0.9), row("r2", True, 2.0, metric="cost")],
        state,
        "r2",
        "2026-01-02T02:00:00+00:00",
    )
    assert [(e["event"], e["metric"]) for e in events] == [(RECOVERY, "overall")]
    assert set(state["open"]) == {"sonnet|cost"}


def test_run_link(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_UI_URL", raising=False)
    assert run_link("r1") == "http://localhost:3000/runs/r1"
    monkeypatch.setenv("BENCH_UI_URL", "https://dagster.example.com/")
    assert run_link("r1") == "https://dagster.example.com/runs/r1"


def test_send_retries_with_backoff_then_succeeds() -> None:
    waits: list[float] = []
    replies = [Reply(503, {"error": "busy"}), Reply(500, {"error": "oops"}), Reply(204, "")]
    with ScriptedServer(replies=replies) as hook:
        ok = send_notification(f"{hook.url}/h", {"event": "regression"}, sleep=waits.append)
    assert ok
    assert len(hook.requests) == 3
    assert all(r.body == {"event": "regression"} for r in hook.requests)
    assert waits == [0.5, 1.0]


def test_failed_send_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="bench_pipeline.ops.notify")
    waits: list[float] = []
    with ScriptedServer(handler=lambda rec: Reply(502, "bad gateway")) as hook:
        ok = send_notification(f"{hook.url}/h", {"event": "recovery"}, sleep=waits.append)
    assert not ok and len(hook.requests) == 4 and waits == [0.5, 1.0, 2.0]
    assert "giving up" in caplog.text

    # A client error is not retried.
    with ScriptedServer(handler=lambda rec: Reply(404, "no such hook")) as hook:
        assert not send_notification(f"{hook.url}/h", {"event": "x"}, sleep=waits.append)
    assert len(hook.requests) == 1

    # Nothing listening (a port of 127.0.0.1 just closed): logged, False.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert not send_notification(
        f"http://127.0.0.1:{port}/h", {"event": "x"}, attempts=2, sleep=lambda _: None
    )
    assert not send_notification("not a url", {"event": "x"}, sleep=lambda _: None)


def test_nulls_from_parquet_are_not_regressions() -> None:
    import pandas as pd

    rows = [
        row("r1", True, 0.5) | {"regressed": pd.NA},
        row("r1", True, 0.5, metric="cost") | {"regressed": float("nan")},
    ]
    events, _ = decide(rows, empty_state("invoices"), "r1", "2026-01-01T02:00:00+00:00")
    assert events == []
