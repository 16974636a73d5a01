"""Judge calibrations (`bench calibrate-judge`): stored per judge configuration, so results can
say whether a run's judge was checked against human labels before anyone relied on it."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pipeline.formats.model import Judge, content_hash
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse


def judge_config_hash(judge: Judge) -> str:
    """What identifies a judge for calibration: the model and its effort (the endpoint, key
    and criteria do not change how the model grades a pass/fail rubric)."""
    return content_hash({"model": judge.model, "effort": judge.effort})


def calibration_path(judge: Judge) -> str:
    return layout.calibration(judge_config_hash(judge))


def record_calibration(
    warehouse: Warehouse,
    judge: Judge,
    report: dict[str, Any],
    *,
    rubric: str | None,
    dataset: str | Path,
) -> dict[str, Any]:
    """Store a calibration (latest in `calibrations/<hash>.json`, every one under history/)."""
    dataset = Path(dataset)
    now = datetime.now(UTC)
    record = {
        "judge_config_hash": judge_config_hash(judge),
        "judge": {"model": judge.model, "effort": judge.effort},
        "calibrated_at": now.isoformat(),
        "rubric": rubric,
        "rubric_sha256": report.get("rubric_sha256"),
        "dataset": str(dataset.absolute()),
        "dataset_sha256": hashlib.sha256(dataset.read_bytes()).hexdigest()
        if dataset.is_file()
        else None,
        **{
            k: report.get(k)
            for k in (
                "items",
                "graded",
                "abstained",
                "errors",
                "coverage",
                "accuracy",
                "kappa",
                "confusion",
                "cost_usd",
                "disagreements",
            )
        },
    }
    warehouse.write_json(calibration_path(judge), record)
    warehouse.write_json(
        layout.calibration(record["judge_config_hash"], now),
        {**record, "results": report.get("results")},
    )
    return record


def judge_calibration(warehouse: Warehouse, judge: Judge | None) -> dict[str, Any] | None:
    """The latest calibration of this judge configuration, or None when it was never
    calibrated (results show "judge not calibrated")."""
    if judge is None:
        return None
    rel = calibration_path(judge)
    return warehouse.read_json(rel) if warehouse.exists(rel) else None
