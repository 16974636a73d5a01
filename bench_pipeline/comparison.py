"""`bench compare`: paired comparison of a run's configurations against a config or a run.

The statistics live in `results.compare`; this module picks the rows (latest trial and score
per cell), refuses to mix task-set revisions, and renders the result for the terminal.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench_pipeline import results as R
from bench_pipeline.benchmark_run import load_run
from bench_pipeline.derived import run_rows
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.warehouse.store import Warehouse


def compare_command(
    warehouse: Warehouse, run_id: str, against: str | None, candidate: str | None = None
) -> dict[str, Any]:
    """Every config of `run_id` (or only `candidate`) paired against `against`: a config id of
    the run, another run id (same config ids), or None for the baseline config."""
    run = load_run(run_id, warehouse)
    trials, scores = run_rows(warehouse, run_id)
    config_ids = [c.id for c in run.launch.configs]
    if candidate is not None and candidate not in config_ids:
        raise BenchInputError(
            None,
            "--candidate",
            f"run {run_id} has no config '{candidate}'; configs: {', '.join(config_ids)}",
        )
    if against is None or against in config_ids:
        rows = R.compare_all(trials, scores, against)
        mode = "config"
    elif warehouse.exists(f"manifests/{against}.json"):
        other = load_run(against, warehouse)
        if other.taskset.revision != run.taskset.revision:
            raise BenchInputError(
                None,
                "--against",
                f"run {against} ran task-set revision {other.taskset.revision}, run {run_id} "
                f"{run.taskset.revision}: results of different revisions are never compared",
            )
        bt, bs = run_rows(warehouse, against)
        both_t, both_s = (
            pd.concat([trials, bt], ignore_index=True),
            pd.concat([scores, bs], ignore_index=True),
        )
        shared = [c for c in config_ids if c in {c2.id for c2 in other.launch.configs}]
        rows = pd.DataFrame(
            [
                R.paired_comparison(
                    both_t, both_s, c, c, candidate_run_id=run_id, baseline_run_id=against
                )
                for c in shared
            ]
        )
        mode = "run"
    else:
        raise BenchInputError(
            None, "--against", f"'{against}' is neither a config of run {run_id} nor a run id"
        )
    if candidate is not None and not rows.empty:
        rows = rows[rows["candidate_config"] == candidate]
    return {
        "run_id": run_id,
        "against": against,
        "mode": mode,
        "comparisons": [{k: _plain(v) for k, v in r.items()} for r in rows.to_dict("records")],
    }


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def render_comparison(result: dict[str, Any]) -> str:
    def f(v: Any, fmt: str = "{:.4f}") -> str:
        return "-" if v is None else fmt.format(v)

    lines = [
        f"Paired comparison of run {result['run_id']} against {result['against'] or 'the baseline config'}"
    ]
    if not result["comparisons"]:
        lines.append("  nothing to compare")
    for c in result["comparisons"]:
        lines += [
            "",
            f"{c['candidate_config']} ({c['candidate_run_id']}) vs {c['baseline_config']} ({c['baseline_run_id']}), primary scorer {c.get('primary_scorer')}",
            f"  pairs counted {c['pairs']} of {c['pairs_matched']}: both pass {c['both_pass']}, candidate only {c['candidate_only']}, "
            f"baseline only {c['baseline_only']}, neither {c['neither']}",
            f"  excluded: infrastructure {c['infra_excluded']}, unscored {c['unscored_excluded']}; holdout pairs {c['holdout_pairs']} "
            f"(both {c['holdout_both_pass']}, candidate only {c['holdout_candidate_only']}, baseline only {c['holdout_baseline_only']})",
            f"  tasks passing every repetition: candidate {c['candidate_tasks_all_pass']}, baseline {c['baseline_tasks_all_pass']} of {c['tasks']}",
            f"  sign test over unique tasks: {c['sign_wins']} better, {c['sign_losses']} worse, {c['sign_ties']} tied, two-sided p = {f(c['sign_test_p'])}",
            f"  cost delta per trial (both succeeded, {c['cost_pairs']} pairs): {f(c['cost_delta_mean_usd'], '${:+.4f}')}; "
            f"duration delta ({c['duration_pairs']} pairs): {f(c['duration_delta_mean_seconds'], '{:+.2f}s')}",
            f"  cost per accepted result (failed trials' spend included): candidate {f(c['candidate_cost_per_accepted_usd'], '${:.4f}')}, "
            f"baseline {f(c['baseline_cost_per_accepted_usd'], '${:.4f}')}",
        ]
    return "\n".join(lines)
