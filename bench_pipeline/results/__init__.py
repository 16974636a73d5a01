"""Results: pure functions from TRIALS/SCORES tables to the derived tables of SPEC §5.

Every function takes pandas DataFrames with the columns of `bench_pipeline.warehouse.schemas` and returns
DataFrames (or JSON-ready dicts); each module's docstring lists its output columns. The heavy
per-trial step is `trial_overall(trials, scores)`: pass its result as `per_trial=` to the
table functions to compute it once.
"""

import importlib
import sys
import types
from typing import Any

# Where each public name lives. The package imports nothing until a name is used (PEP 562), so
# `bench` commands that never build a table do not pay for pandas, and matplotlib is imported
# only when a chart is drawn.
_HOME = {
    "config_table_by_tag": "by_tag",
    "recommendations_by_tag": "by_tag",
    "compare_all": "compare",
    "paired_comparison": "compare",
    "paired_trials": "compare",
    "sign_test_p": "compare",
    "config_table": "config_table",
    "config_cells": "config_table",
    "ConfigCells": "config_table",
    "grid_pivot": "grid",
    "task_config_grid": "grid",
    "pareto_chart": "pareto",
    "pareto_chart_svg": "pareto",
    "pareto_frontier": "pareto",
    "recommend": "recommend",
    "recommendations_frame": "recommend",
    "detect_regressions": "regressions",
    "render_report_html": "report",
    "TRIAL_COLUMNS": "scores",
    "latest_scores": "scores",
    "latest_trials": "scores",
    "latest_trial_overall": "scores",
    "latest_trial_positions": "scores",
    "scorer_catalog": "scores",
    "trial_overall": "scores",
    "clustered_ci_by": "uncertainty",
    "clustered_mean_ci": "uncertainty",
    "naive_mean_ci": "uncertainty",
    "unscored_cells": "unscored",
    "with_missing": "unscored",
    "pass_at_k": "uncertainty",
    "pass_hat_k": "uncertainty",
    "pass_k_by": "uncertainty",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


class _Package(types.ModuleType):
    """Importing a submodule binds it on the package; `config_table` and `recommend` are
    functions named like their modules, and must stay the functions."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _HOME.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "ConfigCells",
    "TRIAL_COLUMNS",
    "clustered_ci_by",
    "clustered_mean_ci",
    "compare_all",
    "config_cells",
    "config_table",
    "config_table_by_tag",
    "detect_regressions",
    "grid_pivot",
    "latest_scores",
    "latest_trial_overall",
    "latest_trial_positions",
    "latest_trials",
    "naive_mean_ci",
    "paired_comparison",
    "paired_trials",
    "pareto_chart",
    "pareto_chart_svg",
    "pareto_frontier",
    "pass_at_k",
    "pass_hat_k",
    "pass_k_by",
    "recommend",
    "recommendations_by_tag",
    "recommendations_frame",
    "render_report_html",
    "scorer_catalog",
    "sign_test_p",
    "task_config_grid",
    "trial_overall",
]
