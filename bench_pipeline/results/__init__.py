"""Results: pure functions from TRIALS/SCORES tables to the derived tables of SPEC §5.

Every function takes pandas DataFrames with the columns of `bench_pipeline.warehouse.schemas` and returns
DataFrames (or JSON-ready dicts); each module's docstring lists its output columns. The heavy
per-trial step is `trial_overall(trials, scores)`: pass its result as `per_trial=` to the
table functions to compute it once.
"""

from .by_tag import config_table_by_tag, recommendations_by_tag
from .compare import compare_all, paired_comparison, paired_trials, sign_test_p
from .config_table import config_table
from .grid import grid_pivot, task_config_grid
from .pareto import pareto_chart, pareto_chart_svg, pareto_frontier
from .recommend import recommend, recommendations_frame
from .regressions import detect_regressions
from .report import render_report_html
from .scores import latest_scores, latest_trials, scorer_catalog, trial_overall
from .uncertainty import (
    clustered_ci_by,
    clustered_mean_ci,
    naive_mean_ci,
    pass_at_k,
    pass_hat_k,
    pass_k_by,
)

__all__ = [
    "clustered_ci_by",
    "clustered_mean_ci",
    "compare_all",
    "config_table",
    "config_table_by_tag",
    "detect_regressions",
    "grid_pivot",
    "latest_scores",
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
