"""`bench calibrate-judge`: agreement of the configured judge with human labels.

Each dataset item `{id, prompt, criteria, patch_or_answer, label: 0|1}` is graded by the same
pass/fail rubric call the `rubric` scorer makes (`judge.run_rubric`), with the calibration
rubric text appended as grading guidance. Items the judge abstains on or cannot answer are
counted and listed but left out of accuracy, kappa and the confusion table (they are neither
agreement nor disagreement); `coverage` says how many were graded.

The confusion table treats label 1 ("meets the criteria") as positive:
`{"tp": human 1 & judge 1, "fn": human 1 & judge 0, "fp": human 0 & judge 1, "tn": both 0}`
and is also given as rows = human label [1, 0], columns = judge [1, 0].
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench_pipeline.formats.errors import BenchInputError, read_input_text
from bench_pipeline.formats.model import Judge, Prices
from bench_pipeline.lazy import anthropic
from bench_pipeline.scorers.judge import make_client, run_rubric, validate_judge

ITEM_KEYS = ("id", "prompt", "criteria", "patch_or_answer", "label")


def confusion(y_true: Sequence[int], y_pred: Sequence[int]) -> dict[str, int]:
    """2x2 counts with 1 as the positive class."""
    if len(y_true) != len(y_pred):
        raise ValueError("y_true and y_pred differ in length")
    pairs = list(zip(y_true, y_pred, strict=True))
    return {
        "tp": sum(1 for t, p in pairs if t == 1 and p == 1),
        "fn": sum(1 for t, p in pairs if t == 1 and p == 0),
        "fp": sum(1 for t, p in pairs if t == 0 and p == 1),
        "tn": sum(1 for t, p in pairs if t == 0 and p == 0),
    }


def accuracy(y_true: Sequence[int], y_pred: Sequence[int]) -> float | None:
    if not y_true:
        return None
    return sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == p) / len(y_true)


def cohen_kappa(y_true: Sequence[int], y_pred: Sequence[int]) -> float | None:
    """Cohen's kappa (po - pe) / (1 - pe) for two raters over any labels.

    None when undefined: no items, or chance agreement pe == 1 (both raters used one and the
    same label throughout - agreement then carries no information beyond chance).
    """
    n = len(y_true)
    if n == 0 or n != len(y_pred):
        return None
    labels = set(y_true) | set(y_pred)
    po = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == p) / n
    pe = sum((list(y_true).count(c) / n) * (list(y_pred).count(c) / n) for c in labels)
    if pe == 1:
        return None
    return (po - pe) / (1 - pe)


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    text = read_input_text(path)
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchInputError(path, None, f"cannot read dataset: {exc}") from None
    return validate_dataset(items, path)


def validate_dataset(items: Any, source: str | Path | None = None) -> list[dict[str, Any]]:
    if isinstance(items, dict) and "items" in items:
        items = items["items"]
    if not isinstance(items, list) or not items:
        raise BenchInputError(source, None, "dataset must be a non-empty list of items")
    seen: set[str] = set()
    for i, item in enumerate(items):
        key = f"[{i}]"
        if not isinstance(item, dict):
            raise BenchInputError(source, key, "item must be an object")
        missing = [k for k in ITEM_KEYS if k not in item]
        if missing:
            raise BenchInputError(source, key, f"missing keys {missing}")
        if str(item["id"]) in seen:
            raise BenchInputError(source, f"{key}.id", f"duplicate id {item['id']!r}")
        seen.add(str(item["id"]))
        if item["label"] not in (0, 1) or isinstance(item["label"], bool):
            raise BenchInputError(source, f"{key}.label", "label must be 0 or 1")
        crit = item["criteria"]
        if not isinstance(crit, list) or not crit or not all(isinstance(c, str) for c in crit):
            raise BenchInputError(source, f"{key}.criteria", "must be a non-empty list of strings")
        if not isinstance(item["prompt"], str) or not isinstance(item["patch_or_answer"], str):
            raise BenchInputError(source, key, "prompt and patch_or_answer must be strings")
    return items


def _rubric_text(rubric: str | Path | None) -> str | None:
    if rubric is None:
        return None
    if isinstance(rubric, Path) or ("\n" not in rubric and len(rubric) < 1024):
        path = Path(rubric)
        if path.is_file():
            return read_input_text(path)
        if isinstance(rubric, Path):
            raise BenchInputError(path, None, "rubric file not found")
    return str(rubric)


def _kind(text: str) -> str:
    head = text.lstrip()
    return "patch" if head.startswith(("diff --git", "--- ", "Index: ")) else "answer"


def calibrate_judge(
    rubric: str | Path | None,
    dataset_items: list[dict[str, Any]] | str | Path,
    judge: Judge,
    environ: Mapping[str, str],
    prices: Prices,
    client: anthropic.Anthropic | None = None,
) -> dict[str, Any]:
    """Grade every labelled item with the judge; report agreement with the human labels."""
    if isinstance(dataset_items, str | Path):
        items = load_dataset(dataset_items)
    else:
        items = validate_dataset(dataset_items)
    rubric_text = _rubric_text(rubric)
    validate_judge(judge, environ)
    client = client or make_client(judge, environ)

    rows, y_true, y_pred = [], [], []
    total_cost: float | None = 0.0
    for item in items:
        text = item["patch_or_answer"]
        v = run_rubric(
            client, judge, prices, item["prompt"], item["criteria"], _kind(text), text, rubric_text
        )
        total_cost = None if total_cost is None or v.cost_usd is None else total_cost + v.cost_usd
        pred = {"pass": 1, "fail": 0}.get(v.verdict or "")
        rows.append(
            {
                "id": item["id"],
                "label": item["label"],
                "judge": pred,
                "verdict": v.verdict,
                "agrees": None if pred is None else pred == item["label"],
                "reason": v.reason,
                "error": v.error,
                "cost_usd": v.cost_usd,
            }
        )
        if pred is not None:
            y_true.append(item["label"])
            y_pred.append(pred)

    c = confusion(y_true, y_pred)
    return {
        "judge_model": judge.model,
        "rubric_sha256": hashlib.sha256((rubric_text or "").encode()).hexdigest(),
        "items": len(items),
        "graded": len(y_true),
        "abstained": sum(1 for r in rows if r["verdict"] == "abstain"),
        "errors": sum(1 for r in rows if r["error"]),
        "coverage": len(y_true) / len(items),
        "accuracy": accuracy(y_true, y_pred),
        "kappa": cohen_kappa(y_true, y_pred),
        "confusion": c,
        "confusion_table": {
            "rows": "human label 1, 0",
            "columns": "judge 1, 0",
            "values": [[c["tp"], c["fn"]], [c["fp"], c["tn"]]],
        },
        "cost_usd": total_cost,
        "disagreements": [r["id"] for r in rows if r["agrees"] is False],
        "results": rows,
    }


def format_report(report: dict[str, Any]) -> str:
    """Plain-text summary for the CLI."""
    c = report["confusion"]
    acc = report["accuracy"]
    kappa = report["kappa"]
    cost = report["cost_usd"]
    lines = [
        f"judge {report['judge_model']}: {report['graded']}/{report['items']} graded "
        f"({report['abstained']} abstained, {report['errors']} errors)",
        f"accuracy {acc:.3f}" if acc is not None else "accuracy n/a",
        f"Cohen's kappa {kappa:.3f}" if kappa is not None else "Cohen's kappa undefined",
        "                 judge=1  judge=0",
        f"human=1          {c['tp']:>7}  {c['fn']:>7}",
        f"human=0          {c['fp']:>7}  {c['tn']:>7}",
        f"judge cost ${cost:.4f}" if cost is not None else "judge cost unknown (no price)",
    ]
    if report["disagreements"]:
        lines.append("disagreements: " + ", ".join(map(str, report["disagreements"])))
    return "\n".join(lines)
