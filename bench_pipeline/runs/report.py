"""`bench report`: the results explorer page of one run (derived tables + bounded evidence)."""

from __future__ import annotations

from pathlib import Path

from bench_pipeline.results.report import render_report_html
from bench_pipeline.runs.derived import Derived, compute_derived, run_rows
from bench_pipeline.runs.evidence import check_commands, gather_evidence
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse


def report_html(warehouse: Warehouse, run_id: str, derived: Derived | None = None) -> str:
    """The self-contained explorer HTML of `run_id` (see `results/report.py`); `derived`: its
    derived tables when the caller has just computed them."""
    derived = derived or compute_derived(warehouse, run_id)
    trials, scores = run_rows(warehouse, run_id)
    evidence, caps = gather_evidence(trials, check_commands(derived.run))
    tasks = {
        t.id: {
            "title": t.title,
            "tags": list(t.tags),
            "holdout": t.holdout,
            "difficulty": t.difficulty,
            "is_text": t.is_text,
        }
        for t in derived.run.taskset.tasks
    }
    return render_report_html(
        derived.meta(),
        derived.tables,
        derived.recommendations,
        trials,
        scores,
        evidence,
        tasks=tasks,
        baseline_config=derived.baseline_config,
        caps=caps,
    )


def write_report(warehouse: Warehouse, run_id: str, derived: Derived | None = None) -> Path:
    """Write the run's explorer page beside its results (`reports/<run_id>.html`)."""
    return warehouse.write_text(layout.report(run_id), report_html(warehouse, run_id, derived))
