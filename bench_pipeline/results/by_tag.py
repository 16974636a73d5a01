"""Config table and recommendations per task tag of one run.

`config_table_by_tag(trials, scores, *, per_trial=None)` -> one row per (tag, config_id):
`tag` first, then the config table columns (see config_table). Tasks with no tags go under
`-` (a reserved tag name); a task with several tags counts in each of them.

`recommendations_by_tag(by_tag_table)` -> recommendations_frame rows with a leading `tag`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._common import UNTAGGED, single_run
from .config_table import aggregate_trials, catalog_for
from .recommend import recommendations_frame
from .scores import trial_overall


def _tag_list(value: object) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        return [value] if value else []
    return [str(t) for t in value if t is not None and str(t) != ""]


def task_tags(per_trial: pd.DataFrame) -> dict[str, list[str]]:
    """task_id -> its tags (first row per task; `-` when untagged)."""
    first = per_trial.drop_duplicates("task_id")
    tags = first["tags"] if "tags" in first else pd.Series([[]] * len(first), index=first.index)
    return {
        str(task): (_tag_list(t) or [UNTAGGED])
        for task, t in zip(first["task_id"].astype(object), tags, strict=True)
    }


def config_table_by_tag(
    trials: pd.DataFrame, scores: pd.DataFrame, *, per_trial: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Config table per tag (see module doc)."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "config_table_by_tag")
    catalog = catalog_for(pt, scores)
    k = int(pt["repetition"].nunique()) if len(pt) else 0
    mapping = task_tags(pt)
    tag_tasks: dict[str, list[str]] = {}
    for task, tags in mapping.items():
        for tag in dict.fromkeys(tags):
            tag_tasks.setdefault(tag, []).append(task)
    task_cat = pt["task_id"].astype("category")
    codes = task_cat.cat.codes.to_numpy()
    cats = list(task_cat.cat.categories.astype(object))
    slim = pt.drop(columns=[c for c in ("tags", "trial_id", "error") if c in pt.columns])
    for col in ("outcome", "suite", "agent", "agent_kind", "model", "effort", "factory_ref"):
        if col in slim.columns and not isinstance(slim[col].dtype, pd.CategoricalDtype):
            slim[col] = slim[col].astype("category")
    positions, labels = [], []
    for tag in sorted(tag_tasks):
        wanted = [cats.index(t) for t in tag_tasks[tag]]
        pos = np.flatnonzero(np.isin(codes, wanted))
        positions.append(pos)
        labels.append(np.full(len(pos), tag, dtype=object))
    if not positions:
        return aggregate_trials(
            slim.assign(tag=pd.Series(dtype=object)), ["tag", "config_id"], catalog, k
        )
    idx = np.concatenate(positions)
    exploded = slim.iloc[idx].reset_index(drop=True)
    exploded.insert(0, "tag", pd.Categorical(np.concatenate(labels)))
    exploded["run_id"] = exploded["run_id"].astype("category")
    out = aggregate_trials(exploded, ["tag", "config_id"], catalog, k)
    return out.sort_values(["tag", "config_id"]).reset_index(drop=True)


def recommendations_by_tag(by_tag_table: pd.DataFrame) -> pd.DataFrame:
    """Best quality / most efficient / lowest cost per tag."""
    return recommendations_frame(by_tag_table, keys=["tag"])
