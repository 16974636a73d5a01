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

The Dagster backfill that executes a rescore is `bench_pipeline.defs.rescore`; this module
holds everything it needs that is not Dagster: parsing, merging, stored settings, history.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from bench_pipeline.formats.errors import BenchInputError, closest, read_input_text
from bench_pipeline.formats.loader import (
    custom_criterion_problem,
    read_criterion,
    scorer_spec_problem,
)
from bench_pipeline.formats.model import (
    Judge,
    JudgeCriterion,
)
from bench_pipeline.formats.registry import uses_judge
from bench_pipeline.formats.serialize import from_jsonable
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse

# --------------------------------------------------------------------------- pure helpers


def new_rescore_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"rescore-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def parse_scorers(text: str | None, option: str = "scorers") -> list[str] | None:
    """'checks, llm_judge' -> ['checks', 'llm_judge']; unknown names are refused."""
    if text is None:
        return None
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise BenchInputError(None, option, "give at least one scorer, e.g. checks,llm_judge")
    for spec in specs:
        problem = scorer_spec_problem(spec)
        if problem is not None:
            raise BenchInputError(None, option, problem)
    return list(dict.fromkeys(specs))


def load_criteria(path: str | Path) -> list[dict[str, Any]]:
    """Judge criteria from a JSON or YAML file: a list of `{id, weight, prompt}` (a bare string
    is an id), or a mapping with a `criteria` list."""
    path = Path(path)
    text = read_input_text(path)
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
    return [read_criterion(str(path), item, f"criteria[{i}]") for i, item in enumerate(data)]


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
            problem = custom_criterion_problem(cid, u.get("prompt"))
            if problem is not None:
                raise BenchInputError(source, f"criteria[{i}].prompt", problem)
            criteria[cid] = JudgeCriterion(cid, float(u.get("weight", 1.0)), u.get("prompt"))
            order.append(cid)
            added.append(cid)
    return replace(judge, criteria=tuple(criteria[c] for c in order)), added, changed


# --------------------------------------------------------------------------- stored settings


def save_settings(warehouse: Warehouse, run_id: str, rescore_id: str, settings: dict) -> None:
    warehouse.write_json(layout.rescore_settings(run_id, rescore_id), settings)


def rescore_history(warehouse: Warehouse, run_id: str) -> list[dict[str, Any]]:
    """Every rescore of the run, oldest first."""
    folder = warehouse.root / layout.rescore_settings(run_id)
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


def preflight(run: BenchmarkRun, scorers: list[str], judge: Judge | None, environ: dict) -> None:
    """Refuse before any call what would fail on every trial (missing key, bad scorer)."""
    from bench_pipeline.runs.score import scorer_context
    from bench_pipeline.scorers.base import make_scorer
    from bench_pipeline.scorers.judge import validate_judge

    context = scorer_context(run, judge, environ)
    for spec in scorers:
        make_scorer(spec, context).preflight()
    if judge is not None and uses_judge(scorers):
        validate_judge(judge, environ)
