"""Config table and recommendations per task tag of one run.

`config_table_by_tag(trials, scores, *, per_trial=None)` -> one row per (tag, config_id):
`tag` first, then the config table columns (see config_table). Tasks with no tags go under
`-` (a reserved tag name); a task with several tags counts in each of them.

`recommendations_by_tag(by_tag_table)` -> recommendations_frame rows with a leading `tag`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from bench_pipeline.formats.vocabulary import UNTAGGED

from ._common import first_rows, n_distinct, single_run, str_codes, unique_inverse
from .config_table import (
    ConfigCells,
    aggregate_trials,
    catalog_for,
    cell_stats,
    finish_cells,
    group_index,
)
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
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    per_trial: pd.DataFrame | None = None,
    cells: ConfigCells | None = None,
) -> pd.DataFrame:
    """Config table per tag (see module doc).

    Tags are exploded at the task level: per-(config, task) sums are computed once over the
    trials, then every (config, task) cell feeds the (tag, config) row of each of its task's
    tags. Clustered CIs and pass@k need exactly these per-task sums. `cells`: those sums
    already computed (`config_cells(per_trial)`, shared with config_table)."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "config_table_by_tag")
    catalog = catalog_for(pt, scores)
    k = n_distinct(pt["repetition"]) if len(pt) else 0
    if len(pt) == 0:
        return aggregate_trials(
            pt.assign(tag=pd.Series(dtype=object)), ["tag", "config_id"], catalog, k
        )
    if cells is not None and cells.per_trial is pt:
        cfg_first, n_cfg, cells = cells.first, cells.n_groups, cells.cells
    else:
        inv, cfg_first, n_cfg = group_index(pt, ["config_id"])
        cells = cell_stats(pt, inv, n_cfg, catalog)
    task_codes, task_names = str_codes(pt["task_id"])
    first = first_rows(task_codes, len(task_names))
    # (each task's tags taken in one gather, and the cells fanned out to their tags with
    # array ops: a row lookup per task and a loop over the cells cost 3 s at 25,000 tasks)
    tag_names, per_task, codes = _task_tags(pt, first)
    starts = np.cumsum(per_task) - per_task
    # each cell of a task once per tag of it, in cell order, then tag order (as a loop would)
    cell_ids = np.flatnonzero(np.asarray(cells["task"]) >= 0)
    cell_task = np.asarray(cells["task"], dtype=np.int64)[cell_ids]
    fan = per_task[cell_task]
    take_a = np.repeat(cell_ids, fan)
    within = np.arange(len(take_a)) - np.repeat(np.cumsum(fan) - fan, fan)
    tag_of_take = codes[np.repeat(starts[cell_task], fan) + within]
    group_of_take = np.asarray(cells["group"], dtype=np.int64)[take_a]
    uniq, group = unique_inverse(tag_of_take * n_cfg + group_of_take)
    key_values = {
        "tag": pd.Series([tag_names[u // n_cfg] for u in uniq], dtype=object),
        "config_id": pt["config_id"].iloc[cfg_first[uniq % n_cfg]].reset_index(drop=True),
    }
    out = finish_cells(
        pt, cells, group, len(uniq), key_values, ["tag", "config_id"], catalog, k, take=take_a
    )
    return out.sort_values(["tag", "config_id"]).reset_index(drop=True)


def _task_tags(pt: pd.DataFrame, first: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The tags of the tasks whose first rows are `first` (-1: no row): (every tag's name,
    sorted; how many tags each task has; every task's tag codes end to end, in task order).
    A task's tags keep their order, without repeats, null or empty ones; a task without any
    has `-`. Arrow lists (as the warehouse reads them) are taken apart with Arrow compute
    (a Python list per task: ~0.1 s at 25,000 tasks); any other column is made such lists
    first, a task at a time."""
    tasks = np.flatnonzero(first >= 0)
    tags = pt["tags"].iloc[first[tasks]] if "tags" in pt else pd.Series([[]] * len(tasks))
    lists = None
    if isinstance(tags.dtype, pd.ArrowDtype):
        lists = pa.chunked_array(tags.array.__arrow_array__()).combine_chunks()
    if lists is None or not (
        (pa.types.is_list(lists.type) or pa.types.is_large_list(lists.type))
        and pa.types.is_string(lists.type.value_type)
    ):
        lists = pa.array([_tag_list(value) for value in tags.tolist()], pa.list_(pa.string()))
    return _arrow_task_tags(lists, tasks, len(first))


def _arrow_task_tags(
    lists: pa.Array, tasks: np.ndarray, n_tasks: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """`_task_tags` of Arrow string lists: `lists[i]` are the tags of task `tasks[i]`."""
    flat = pc.list_flatten(lists)  # (a null list has no items, whatever lies under it)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    owner = np.repeat(tasks, lengths)
    kept = pc.and_(pc.is_valid(flat), pc.not_equal(flat, ""))
    kept = pc.fill_null(kept, False).to_numpy(zero_copy_only=False)
    encoded = flat.filter(pa.array(kept)).dictionary_encode()
    owner = owner[kept]
    names = encoded.dictionary.to_pylist()
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    # a tag repeated within a task counts once, where it first came
    firsts = np.sort(np.unique(owner * max(len(names), 1) + code, return_index=True)[1])
    owner, code = owner[firsts], code[firsts]
    tagged = np.bincount(owner, minlength=n_tasks)
    untagged = tagged == 0
    tag_names = sorted({*names, *([UNTAGGED] if untagged.any() else [])})
    rank = {t: i for i, t in enumerate(tag_names)}
    per_task = np.where(untagged, 1, tagged)
    starts = np.cumsum(per_task) - per_task
    codes = np.empty(int(per_task.sum()), dtype=np.int64)
    within = np.arange(len(owner)) - (np.cumsum(tagged) - tagged)[owner]
    codes[starts[owner] + within] = np.array([rank[t] for t in names], dtype=np.int64)[code]
    if untagged.any():
        codes[starts[untagged]] = rank[UNTAGGED]
    return tag_names, per_task, codes


def recommendations_by_tag(by_tag_table: pd.DataFrame) -> pd.DataFrame:
    """Best quality / most efficient / lowest cost per tag."""
    return recommendations_frame(by_tag_table, keys=["tag"])
