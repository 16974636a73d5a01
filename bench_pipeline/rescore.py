"""`bench rescore`: grade finished trials again, never rerunning an agent.

A rescore is a backfill of the `scores` asset partitions (config x repetition) of one run: each
partition that has trials is executed with the `bench_rescore_job` on the Dagster instance, with
the `scores` op configured by `{run_id, scorers, rescore_id, only_unscored}`. Rows are appended
under their own `rescore_id` (`rescore-<UTC timestamp>-<hex>`); the latest row per trial x
scorer wins in results, and every earlier row stays queryable.

- default: only cells whose latest status is missing or error are graded;
- `--all`: every cell of the selected scorers is graded again;
- `--scorers`: grade with these scorers instead of the launch's (adds new scorers to a run);
- `--criteria FILE`: merge judge criteria into the run's judge by id (a criterion already there
  keeps every field the file does not give; a new id is added). The merged judge is stored in
  `rescores/<run_id>/<rescore_id>.json` with the other settings; the next rescore starts from
  the latest merged judge (`effective_judge`). Changing an existing criterion does not regrade
  the cells it already scored unless `--all` is given (judge calls cost money).

Decision: the frozen manifest is never rewritten. Because the `scores` op has no judge setting
yet, a rescore that changes the judge grades its partitions here (same rows, same file layout
as `pipeline.score_partition`) and reports each partition's materialization to the instance as
a runless asset event, so the Dagster UI still shows it. When `ScoreConfig` gains a
`judge_json` field, the Dagster job is used for that case too (see `_job_takes_judge`).

The same module records judge calibrations (`bench calibrate-judge`) in
`calibrations/<judge-config-hash>.json`, and `judge_calibration(warehouse, judge)` tells results
whether a run's judge configuration was calibrated.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from bench_pipeline.benchmark_run import BenchmarkRun
from bench_pipeline.formats.errors import BenchInputError, closest
from bench_pipeline.formats.model import (
    BUILTIN_CRITERIA,
    BUILTIN_SCORERS,
    ID_PATTERN,
    Judge,
    JudgeCriterion,
    content_hash,
)
from bench_pipeline.formats.serialize import from_jsonable, to_jsonable
from bench_pipeline.warehouse.store import Warehouse

CRITERION_KEYS = ("id", "weight", "prompt")
JUDGE_SCORERS = ("rubric", "llm_judge")


# --------------------------------------------------------------------------- pure helpers


def new_rescore_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"rescore-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def parse_scorers(text: str | None, option: str = "--scorers") -> list[str] | None:
    """'checks, llm_judge' -> ['checks', 'llm_judge']; unknown names are refused."""
    if text is None:
        return None
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise BenchInputError(None, option, "give at least one scorer, e.g. checks,llm_judge")
    valid = (*BUILTIN_SCORERS, "workflow:<id>")
    for spec in specs:
        kind, _, arg = spec.partition(":")
        if kind == "workflow" and arg:
            continue
        if kind not in BUILTIN_SCORERS or arg:
            raise BenchInputError(None, option, f"unknown scorer '{spec}'; {closest(spec, valid)}")
    return list(dict.fromkeys(specs))


def load_criteria(path: str | Path) -> list[dict[str, Any]]:
    """Judge criteria from a JSON or YAML file: a list of `{id, weight, prompt}` (a bare string
    is an id), or a mapping with a `criteria` list."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchInputError(str(path), None, f"cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0]
        raise BenchInputError(str(path), None, f"not valid JSON/YAML: {first}") from None
    if isinstance(data, dict):
        unknown = set(data) - {"criteria"}
        if unknown:
            key = sorted(map(str, unknown))[0]
            raise BenchInputError(str(path), key, f"unknown key; {closest(key, ['criteria'])}")
        data = data.get("criteria")
    if not isinstance(data, list) or not data:
        raise BenchInputError(
            str(path), "criteria", "expected a non-empty list of {id, weight, prompt}"
        )
    out = []
    import re

    for i, item in enumerate(data):
        key = f"criteria[{i}]"
        if isinstance(item, str):
            item = {"id": item}
        if not isinstance(item, dict):
            raise BenchInputError(str(path), key, "expected {id, weight, prompt}")
        for k in item:
            if k not in CRITERION_KEYS:
                raise BenchInputError(
                    str(path), f"{key}.{k}", f"unknown key; {closest(str(k), CRITERION_KEYS)}"
                )
        cid = item.get("id")
        if not isinstance(cid, str) or not re.match(ID_PATTERN, cid):
            raise BenchInputError(
                str(path), f"{key}.id", f"is required and must match {ID_PATTERN}"
            )
        if "weight" in item:
            w = item["weight"]
            if isinstance(w, bool) or not isinstance(w, int | float) or w < 0:
                raise BenchInputError(str(path), f"{key}.weight", "must be a number >= 0")
        if "prompt" in item and not isinstance(item["prompt"], str):
            raise BenchInputError(str(path), f"{key}.prompt", "must be text")
        out.append(dict(item))
    return out


def merge_criteria(
    judge: Judge | None, updates: Iterable[dict[str, Any]], source: str | None = None
) -> tuple[Judge, list[str], list[str]]:
    """The judge with `updates` merged by id; returns (judge, added ids, changed ids).
    Only the fields an update gives change; new ids are appended in the file's order."""
    judge = judge or Judge()
    criteria = {c.id: c for c in judge.criteria}
    order = [c.id for c in judge.criteria]
    added, changed = [], []
    for i, u in enumerate(updates):
        cid = u["id"]
        if cid in criteria:
            old = criteria[cid]
            new = replace(
                old,
                weight=float(u.get("weight", old.weight)),
                prompt=u.get("prompt", old.prompt),
            )
            if new != old:
                changed.append(cid)
            criteria[cid] = new
        else:
            if cid not in BUILTIN_CRITERIA and not (u.get("prompt") or "").strip():
                raise BenchInputError(
                    source,
                    f"criteria[{i}].prompt",
                    f"criterion '{cid}' is not built in ({', '.join(BUILTIN_CRITERIA)}); give it a prompt",
                )
            criteria[cid] = JudgeCriterion(cid, float(u.get("weight", 1.0)), u.get("prompt"))
            order.append(cid)
            added.append(cid)
    return replace(judge, criteria=tuple(criteria[c] for c in order)), added, changed


# --------------------------------------------------------------------------- stored settings


def settings_path(run_id: str, rescore_id: str) -> str:
    return f"rescores/{run_id}/{rescore_id}.json"


def save_settings(warehouse: Warehouse, run_id: str, rescore_id: str, settings: dict) -> None:
    warehouse.write_json(settings_path(run_id, rescore_id), settings)


def rescore_history(warehouse: Warehouse, run_id: str) -> list[dict[str, Any]]:
    """Every rescore of the run, oldest first."""
    folder = warehouse.root / "rescores" / run_id
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    items = [json.loads(f.read_text()) for f in files]
    return sorted(items, key=lambda d: d.get("started_at", ""))


def effective_judge(warehouse: Warehouse, run: BenchmarkRun) -> Judge | None:
    """The judge the run's judge scores were last graded with: the latest rescore's merged
    judge when a rescore changed it, else the launch's."""
    for item in reversed(rescore_history(warehouse, run.run_id)):
        if item.get("judge") is not None and item.get("judge_changed"):
            return from_jsonable(Judge, item["judge"])
    return run.launch.judge


# --------------------------------------------------------------------------- execution


def partitions_with_trials(warehouse: Warehouse, run: BenchmarkRun) -> list[tuple[str, int]]:
    trials = warehouse.read("trials", run.run_id)
    if trials.empty:
        return []
    have = {
        (str(c), int(r)) for c, r in zip(trials["config_id"], trials["repetition"], strict=True)
    }
    return [p for p in run.partitions() if p in have]


def summarize(rows: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{scorer: {status: count}} of one rescore's rows."""
    out: dict[str, dict[str, int]] = {}
    if rows.empty:
        return out
    for (scorer, status), n in Counter(zip(rows["scorer"], rows["status"], strict=True)).items():
        out.setdefault(scorer, {})[status] = n
    return dict(sorted(out.items()))


def _job_takes_judge() -> bool:
    from bench_pipeline.defs.benchmark.assets import ScoreConfig

    return "judge_json" in getattr(ScoreConfig, "model_fields", {})


def execute_rescore(
    run: BenchmarkRun,
    paths: Any,
    instance: Any,
    *,
    scorers: list[str] | None,
    rescore_id: str,
    only_unscored: bool,
    judge: Judge | None = None,
    on_partition: Callable[[str, int], None] | None = None,
) -> pd.DataFrame:
    """Backfill the run's score partitions; returns the rows this rescore wrote."""
    import dagster as dg

    from bench_pipeline.definitions import RESCORE_JOB, defs
    from bench_pipeline.defs.launcher import QUIET_LOGGERS, _check, _resources
    from bench_pipeline.defs.partitions import partition_key, register_configs

    register_configs(instance, [c.id for c in run.launch.configs])
    direct = judge is not None and not _job_takes_judge()
    job = defs.resolve_job_def(RESCORE_JOB)
    tags = {"bench/run_id": run.run_id, "bench/suite": run.suite, "bench/rescore_id": rescore_id}
    op_config: dict[str, Any] = {
        "run_id": run.run_id,
        "scorers": list(scorers or []),
        "rescore_id": rescore_id,
        "only_unscored": only_unscored,
    }
    if judge is not None and not direct:
        op_config["judge_json"] = json.dumps(to_jsonable(judge))
    for config_id, rep in partitions_with_trials(paths.warehouse, run):
        if on_partition:
            on_partition(config_id, rep)
        key = partition_key(config_id, rep)
        if direct:
            rows = score_partition_with_judge(
                run, config_id, rep, paths.warehouse, judge, scorers, rescore_id, only_unscored
            )
            instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    asset_key="scores",
                    partition=key,
                    metadata={
                        "run_id": run.run_id,
                        "rescore_id": rescore_id,
                        "rows": len(rows),
                        "statuses": dict(Counter(r["status"] for r in rows)),
                    },
                    tags=tags,
                )
            )
            continue
        result = job.execute_in_process(
            partition_key=key,
            run_config={"ops": {"scores": {"config": op_config}}, **QUIET_LOGGERS},
            instance=instance,
            resources=_resources(paths, False),
            tags=tags,
        )
        _check(result, f"rescore of partition {config_id}|{rep}")
    safe = rescore_id.replace("'", "''")
    return paths.warehouse.read("scores", run.run_id, where=f"rescore_id = '{safe}'")


def score_partition_with_judge(
    run: BenchmarkRun,
    config_id: str,
    rep: int,
    warehouse: Warehouse,
    judge: Judge | None,
    scorers: list[str] | None,
    rescore_id: str,
    only_unscored: bool,
    environ: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """`pipeline.score_partition` with a judge other than the launch's: same rows, same file
    (`scores/<run>/<config>/rep<rep>/<rescore_id>.parquet`)."""
    from bench_pipeline.scoring import score_trials

    safe = config_id.replace("'", "''")
    where = f"config_id = '{safe}' AND repetition = {int(rep)}"
    trials = warehouse.read("trials", run.run_id, where=where)
    if trials.empty:
        return []
    trials = trials.sort_values("attempt_no").drop_duplicates("trial_id", keep="last")
    existing = warehouse.read("scores", run.run_id, where=where)
    rows = score_trials(
        run,
        trials,
        scorers,
        existing=existing,
        only_unscored=only_unscored,
        rescore_id=rescore_id,
        judge=judge,
        environ=environ,
    )
    if rows:
        same = existing[existing["rescore_id"] == rescore_id] if not existing.empty else existing
        merged = (
            pd.concat([same, pd.DataFrame(rows)], ignore_index=True) if not same.empty else rows
        )
        warehouse.write("scores", merged, run.run_id, f"{config_id}/rep{rep}/{rescore_id}")
    return rows


def preflight(run: BenchmarkRun, scorers: list[str], judge: Judge | None, environ: dict) -> None:
    """Refuse before any call what would fail on every trial (missing key, bad scorer)."""
    from bench_pipeline.scorers.base import make_scorer
    from bench_pipeline.scorers.judge import validate_judge
    from bench_pipeline.scoring import scorer_context

    context = scorer_context(run, judge, environ)
    for spec in scorers:
        make_scorer(spec, context).preflight()
    if judge is not None and any(s in JUDGE_SCORERS for s in scorers):
        validate_judge(judge, environ)


# --------------------------------------------------------------------------- calibration


def judge_config_hash(judge: Judge) -> str:
    """What identifies a judge for calibration: the model and its effort (the endpoint, key
    and criteria do not change how the model grades a pass/fail rubric)."""
    return content_hash({"model": judge.model, "effort": judge.effort})


def calibration_path(judge: Judge) -> str:
    return f"calibrations/{judge_config_hash(judge)}.json"


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
        f"calibrations/history/{record['judge_config_hash']}-{now:%Y%m%dT%H%M%S%fZ}.json",
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
