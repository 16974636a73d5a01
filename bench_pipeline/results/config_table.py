"""Config table: one row per configuration of ONE benchmark run.

`config_table(trials, scores, baseline_table=None, *, per_trial=None)` columns, in order:

- `run_id`, `suite`, `config_id`, `agent`, `agent_kind`, `model`, `effort`, `factory_ref`,
  `is_baseline` (the replay of recorded originals) — descriptive, when present in TRIALS;
- `trials` (all trials of the config), `trials_succeeded` (outcome == succeeded);
- `overall`: mean of the scorer-group means; a group mean uses only status == scored rows; all
  `llm_judge:*` criteria form ONE group whose mean is the weight-weighted mean of the criteria
  means (weight 0: reported, not counted); groups with no scored row are left out;
  `overall_ci_low`, `overall_ci_high`: 95 % CI, `overall` +- 1.96 * CR1 SE (clustered by
  task) of the per-trial overall values, clipped to [0, 1];
- `pass_rate`: share of trials whose primary scorer (first of checks, assert, ci in the run,
  else the first group in display order) equals 1, over `primary_scored` trials (primary
  status == scored); `pass_rate_ci_low`, `pass_rate_ci_high` (clustered by task);
  `primary_scorer`, `primary_scored`;
- `k` (number of repetitions in the run), `pass_at_k`, `pass_hat_k` (unbiased, averaged over
  tasks with at least k scored repetitions);
- `avg_cost_usd` (mean over trials with known cost: null cost is unknown, never 0),
  `total_cost_usd` (sum of known costs), `cost_known_trials`, `cost_coverage` (known / trials),
  `cost_unknown` (text "reason: count; ..." of unknown-cost trials, null when coverage is 1);
- `avg_duration_seconds`, `avg_iterations` (over trials whose agent ran at least one attempt:
  a replay of a task without a recorded original ran none), `scorer_cost_usd` (total scorer/judge spend on the
  config's latest scores: kept apart, never part of the config's cost);
- `scored_share` (sum of scored / sum of of over the individual scorers);
- per scorer and per multi-criteria group, in display order: `score_<name>` (mean of scored
  values), `scored_<name>` (trials with status scored), `of_<name>` (trials that should have
  that score: every trial of a run using the scorer; error/inconclusive/not_scored/missing
  rows are the gap between the two);
- with `baseline_table` (another run's config table): `delta_overall`, `delta_pass_rate`
  (current - baseline, joined on config_id) and `delta_avg_cost_usd` (only when
  cost_coverage == 1 on both sides, else null).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from bench_pipeline.formats.vocabulary import OUTCOME_SUCCEEDED

if TYPE_CHECKING:
    import mmap

from ._common import (
    EPS,
    SCORE_SCORED,
    GroupSums,
    as_categorical,
    as_str_series,
    display_key,
    first_rows,
    first_value,
    is_value,
    n_distinct,
    of_col,
    score_col,
    scored_col,
    single_run,
    status_col,
    str_codes,
    unique_inverse,
)
from .scores import scorer_catalog, trial_overall
from .uncertainty import Z95, cells_clustered_se, cells_pass_k

DESCRIPTIVE = ["suite", "agent", "agent_kind", "model", "effort", "factory_ref"]


def catalog_for(per_trial: pd.DataFrame, scores: pd.DataFrame | None) -> pd.DataFrame:
    """The scorer catalog stored on `per_trial` by trial_overall, else computed from scores."""
    records = per_trial.attrs.get("scorer_catalog")
    if records is not None:
        return pd.DataFrame(
            records, columns=["run_id", "scorer", "scorer_group", "weight", "is_primary_group"]
        )
    if scores is None:
        raise ValueError("per_trial carries no scorer catalog: pass scores too")
    return scorer_catalog(scores)


def score_names(catalog: pd.DataFrame) -> tuple[list[str], dict[str, list[str]]]:
    """(all score column names in display order, {multi-criteria group: its criteria})."""
    members: dict[str, list[str]] = {}
    for scorer, group in zip(catalog["scorer"], catalog["scorer_group"], strict=True):
        if scorer not in members.setdefault(group, []):
            members[group].append(scorer)
    multi = {g: m for g, m in members.items() if m != [g]}
    names = sorted(set(catalog["scorer"]) | set(multi), key=lambda n: (display_key(n), n))
    # a group sorts right before its criteria ("llm_judge" < "llm_judge:x" already)
    return names, multi


class ConfigCells(NamedTuple):
    """`cell_stats` of per-trial rows grouped by config_id (what config_table and
    config_table_by_tag both start from: compute it once with `config_cells`)."""

    per_trial: pd.DataFrame
    first: np.ndarray
    n_groups: int
    cells: dict[str, np.ndarray]

    def to_bytes(self) -> bytes:
        """`to_parts` joined."""
        return b"".join(self.to_parts())

    def to_parts(self) -> list[bytes | memoryview]:
        """The sums as bytes, to be stored beside the per-trial rows they were computed from,
        in parts to be written one after another (the arrays' own memory, not copied): a JSON
        header naming each array, a NUL, then each numeric array's own bytes (exact, NaN too;
        as JSON lists of numbers they took 3 s to write at 25,000 tasks x 8 configs, and as
        base64 text 1 s)."""
        import json

        arrays: list[list[object]] = []
        payload: list[memoryview] = []
        named = [("", np.asarray(self.first, dtype=np.int64)), *self.cells.items()]
        for name, values in named:
            if values.dtype == object:
                arrays.append([name, "object", values.tolist()])
                continue
            data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
            arrays.append([name, data.dtype.str, data.nbytes])
            payload.append(memoryview(data).cast("B"))
        # (JSON text never holds a raw NUL: the first one ends the header; spaces after the
        # JSON start the arrays on a multiple of 8 bytes, so their views are aligned)
        header = json.dumps({"n_groups": int(self.n_groups), "arrays": arrays}).encode()
        header += b" " * (-(len(header) + 1) % 8)
        parts: list[bytes | memoryview] = [header, b"\0"]
        for data in payload:
            parts += [data, b"\0" * (-len(data) % 8)]
        return parts

    @classmethod
    def from_bytes(
        cls, per_trial: pd.DataFrame, data: bytes | mmap.mmap, start: int = 0
    ) -> ConfigCells:
        """`to_bytes`' sums, stored in `data` from `start` (a multiple of 8, for aligned
        arrays), for the very `per_trial` rows they were computed from."""
        import json

        end = data.find(b"\0", start)
        if end < 0:
            raise ValueError("config cells: no end to the header")
        header = json.loads(bytes(data[start:end]))
        view, at = memoryview(data)[end + 1 :], 0  # (the arrays' bytes, not copied)
        arrays: dict[str, np.ndarray] = {}
        for name, dtype, item in header["arrays"]:
            if dtype == "object":
                arrays[name] = np.array(item, dtype=object)
                continue
            kind = np.dtype(dtype)
            if at + item > len(view):
                raise ValueError("config cells: fewer bytes than the header names")
            # (read-only views of the stored bytes where the byte order is the machine's:
            # at 25,000 tasks x 8 configs a copy was ~75 MiB on the analysis's peak; the
            # tables only read the sums)
            values = np.frombuffer(view[at : at + item], dtype=kind)
            arrays[name] = values if kind.isnative else values.astype(kind.newbyteorder("="))
            at += item + (-item % 8)
        first = arrays.pop("")
        return cls(per_trial, first, int(header["n_groups"]), arrays)


def config_cells(per_trial: pd.DataFrame, scores: pd.DataFrame | None = None) -> ConfigCells:
    """The per-(config, task) sums of `per_trial` (trial_overall's output)."""
    catalog = catalog_for(per_trial, scores)
    inv, first, n_groups = group_index(per_trial, ["config_id"])
    return ConfigCells(per_trial, first, n_groups, cell_stats(per_trial, inv, n_groups, catalog))


def aggregate_trials(
    pt: pd.DataFrame,
    keys: Sequence[str],
    catalog: pd.DataFrame,
    k: int | None = None,
    *,
    cells: ConfigCells | None = None,
) -> pd.DataFrame:
    """Config-table metrics of per-trial rows grouped by `keys` (e.g. config_id, or tag+config);
    `cells`: `config_cells(pt)` already computed (keys must be ["config_id"])."""
    keys = list(keys)
    if cells is not None and cells.per_trial is pt and keys == ["config_id"]:
        first, n_groups, cells = cells.first, cells.n_groups, cells.cells
    else:
        inv, first, n_groups = group_index(pt, keys)
        cells = cell_stats(pt, inv, n_groups, catalog)
    key_values = {key: pt[key].iloc[first].reset_index(drop=True) for key in keys}
    return finish_cells(pt, cells, cells["group"], n_groups, key_values, keys, catalog, k)


def cell_stats(
    pt: pd.DataFrame, inv: np.ndarray, n_groups: int, catalog: pd.DataFrame
) -> dict[str, np.ndarray]:
    """Sums and counts per (group, task) cell: everything the table needs, computed once.

    Returns arrays over the non-empty cells: `group`, `task` (-1: null task_id), `first`
    (first trial row), and one sum / count per metric."""
    names, _ = score_names(catalog)
    names = [n for n in names if status_col(n) in pt.columns]
    task, task_u = str_codes(pt["task_id"])
    n_tasks = len(task_u)
    raw = inv.astype(np.int64) * (n_tasks + 1) + (task + 1)
    ids, cell = unique_inverse(raw)
    n_cells = len(ids)

    per_cell = np.bincount(cell, minlength=n_cells)
    cell_sum = GroupSums(cell, n_cells)

    # Counts and sums over all rows at once, never a gathered copy of most of them (at a
    # million trials each is 8 MiB, and the peak RSS is made of such copies): a count is the
    # cell's rows minus the few rows outside the mask; a NaN adds 0.0 to a sum, which leaves
    # every partial sum as it was.
    def count_without(out_mask: np.ndarray) -> np.ndarray:
        out = np.flatnonzero(out_mask)
        if len(out) <= len(out_mask) // 2:
            return (per_cell - np.bincount(cell[out], minlength=n_cells)).astype(float)
        return np.bincount(cell[~out_mask], minlength=n_cells).astype(float)

    def count(mask: np.ndarray) -> np.ndarray:
        return count_without(~mask)

    # (one buffer for every column with gaps: a fresh 8 MiB array each is ~2,000 page faults)
    gapless = np.empty(len(pt))

    def total(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gaps = np.isnan(x)
        if not gaps.any():
            return cell_sum(x), per_cell.astype(float)
        np.copyto(gapless, x)
        np.copyto(gapless, 0.0, where=gaps)
        return cell_sum(gapless), count_without(gaps)

    def floats(col: str) -> np.ndarray:
        if col not in pt:
            return np.full(len(pt), np.nan)
        return pt[col].to_numpy(dtype=float, na_value=np.nan)

    out: dict[str, np.ndarray] = {
        "group": ids // (n_tasks + 1),
        "task": ids % (n_tasks + 1) - 1,
        "first": first_rows(cell, n_cells),
        "trials": per_cell.astype(float),
    }
    succ = is_value(pt["outcome"], OUTCOME_SUCCEEDED)
    out["succ"] = count(succ)
    for name, col in (
        ("pass", "passed"),
        ("cost", "cost_usd"),
        ("scost", "scorer_cost_usd"),
        ("overall", "overall"),
    ):
        out[f"{name}_sum"], out[f"{name}_n"] = total(floats(col))
    # Time and attempts describe trials whose agent ran: a replay of a task with no recorded
    # original (not_applicable) or a workspace that could not be made ran no attempt.
    iterations = floats("iterations")
    ran = np.nan_to_num(iterations, nan=1.0) >= 1
    for name, col in (("dur", "duration_seconds"), ("iter", "iterations")):
        out[f"{name}_sum"], out[f"{name}_n"] = total(np.where(ran, floats(col), np.nan))
    # (a flag: its sum is a count, of the few rows that are not baseline ones or the few that are)
    out["baseline"] = count(
        pt["is_baseline"].to_numpy(dtype=bool, na_value=False)
        if "is_baseline" in pt
        else np.zeros(len(pt), dtype=bool)
    )
    if "holdout" in pt:  # (the task grid's flag: any holdout trial in the cell)
        out["holdout"] = count(pt["holdout"].to_numpy(dtype=bool, na_value=False))
    for name in names:
        out[f"v_sum:{name}"], out[f"v_n:{name}"] = total(floats(score_col(name)))
        st = pt[status_col(name)]
        out[f"scored:{name}"] = count(is_value(st, SCORE_SCORED))
        out[f"of:{name}"] = count(st.notna().to_numpy(dtype=bool))
    # unknown-cost reasons: (cell, reason) counts over the few trials without a cost
    unknown = np.flatnonzero(np.isnan(floats("cost_usd")))
    reasons: list[str] = []
    r_codes = np.zeros(0, dtype=np.int64)
    if len(unknown):
        if "cost_unknown_reason" in pt:
            rs = pt["cost_unknown_reason"].iloc[unknown].astype(object)
            rs = rs.where(rs.notna() & (rs != ""), "unknown").astype(str)
        else:
            rs = pd.Series(["unknown"] * len(unknown))
        r_codes, r_u = pd.factorize(rs)
        reasons = [str(r) for r in r_u]
    out["_unknown_cell"] = cell[unknown]
    out["_unknown_reason"] = np.asarray(r_codes, dtype=np.int64)
    out["_reasons"] = np.array(reasons, dtype=object)
    out["_names"] = np.array(names, dtype=object)
    return out


def finish_cells(
    pt: pd.DataFrame,
    cells: dict[str, np.ndarray],
    group: np.ndarray,
    n_groups: int,
    key_values: dict[str, pd.Series],
    keys: list[str],
    catalog: pd.DataFrame,
    k: int | None,
    take: np.ndarray | None = None,
) -> pd.DataFrame:
    """The table rows from cell sums; `group[i]` is the output row of cell `take[i]` (a cell
    may feed several rows, e.g. a task with several tags)."""
    if take is None:
        take = np.arange(len(group))
    names = list(cells["_names"])
    _, multi = score_names(catalog)
    group_sum = GroupSums(group, n_groups)

    def agg(name: str) -> np.ndarray:
        return group_sum(cells[name][take])

    def mean(s: str, c: str) -> np.ndarray:
        num, den = agg(s), agg(c)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.maximum(den, 1), np.nan)

    # The columns as arrays first, the frame made once at the end (a column set on a frame
    # costs ~0.5 ms of pandas bookkeeping, and a table has ~50)
    data: dict[str, Any] = {}
    data["trials"] = agg("trials")
    data["trials_succeeded"] = agg("succ")
    data["pass_rate"] = mean("pass_sum", "pass_n")
    data["primary_scored"] = agg("pass_n")
    data["avg_cost_usd"] = mean("cost_sum", "cost_n")
    known_n = agg("cost_n")
    data["cost_known_trials"] = known_n
    data["total_cost_usd"] = np.where(known_n > 0, agg("cost_sum"), np.nan)
    data["avg_duration_seconds"] = mean("dur_sum", "dur_n")
    data["avg_iterations"] = mean("iter_sum", "iter_n")
    data["scorer_cost_usd"] = np.where(agg("scost_n") > 0, agg("scost_sum"), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        data["cost_coverage"] = known_n / data["trials"]
    for name in names:
        data[score_col(name)] = mean(f"v_sum:{name}", f"v_n:{name}")
        data[scored_col(name)] = agg(f"scored:{name}").astype(int)
        data[of_col(name)] = agg(f"of:{name}").astype(int)
    weights = catalog.drop_duplicates("scorer").set_index("scorer")["weight"].astype(float)
    for grp, crit in multi.items():
        if score_col(grp) not in data:
            continue
        num = np.zeros(n_groups)
        den = np.zeros(n_groups)
        for c in crit:
            w = float(weights.get(c, 0.0))
            if w <= 0 or score_col(c) not in data:
                continue
            m = np.asarray(data[score_col(c)], dtype=float)
            ok = ~np.isnan(m)
            num[ok] += w * m[ok]
            den[ok] += w
        with np.errstate(divide="ignore", invalid="ignore"):
            data[score_col(grp)] = np.where(den > 0, num / den, np.nan)
    all_groups = set(catalog["scorer_group"])
    group_names = [n for n in names if n in all_groups]
    if group_names:  # the mean of the known group scores (a frame's row mean, skipping NaN)
        values = np.column_stack([np.asarray(data[score_col(g)], dtype=float) for g in group_names])
        known = ~np.isnan(values)
        count = known.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            overall = np.where(count > 0, np.where(known, values, 0.0).sum(axis=1) / count, np.nan)
    else:
        overall = np.full(n_groups, np.nan)
    data["overall"] = overall
    scorer_only = [n for n in names if n not in multi]
    if scorer_only:
        s_sum = sum(np.asarray(data[scored_col(n)]) for n in scorer_only)
        o_sum = sum(np.asarray(data[of_col(n)]) for n in scorer_only)
        data["scored_share"] = np.where(o_sum > 0, s_sum / np.where(o_sum > 0, o_sum, 1), np.nan)
    else:
        data["scored_share"] = np.full(n_groups, np.nan)

    # uncertainty, clustered by task (cells with a null task or key take no part)
    valid = (cells["task"][take] >= 0) & _keys_valid(key_values, n_groups)[group]
    g_ok, t_ok = group[valid], take[valid]
    ose = cells_clustered_se(g_ok, cells["overall_sum"][t_ok], cells["overall_n"][t_ok], n_groups)[
        1
    ]
    data["overall_ci_low"] = np.clip(overall - Z95 * ose, 0, 1)
    data["overall_ci_high"] = np.clip(overall + Z95 * ose, 0, 1)
    p_mean, p_se = cells_clustered_se(
        g_ok, cells["pass_sum"][t_ok], cells["pass_n"][t_ok], n_groups
    )
    data["pass_rate_ci_low"] = np.clip(p_mean - Z95 * p_se, 0, 1)
    data["pass_rate_ci_high"] = np.clip(p_mean + Z95 * p_se, 0, 1)
    if k is None:
        k = n_distinct(pt["repetition"]) if len(pt) else 0
    tasks_n, at_k, hat_k = cells_pass_k(
        g_ok, cells["pass_n"][t_ok], cells["pass_sum"][t_ok], n_groups, k
    )
    data["pass_k_tasks"] = tasks_n
    data["pass_at_k"] = at_k
    data["pass_hat_k"] = hat_k
    data["k"] = k

    # unknown cost reasons, "reason: count; ..." by count desc then reason
    reasons = list(cells["_reasons"])
    text: list[str | None] = [None] * n_groups
    if reasons:
        n_cells = len(cells["trials"])
        per_cell = np.zeros((n_cells, len(reasons)))
        np.add.at(per_cell, (cells["_unknown_cell"], cells["_unknown_reason"]), 1)
        per_group = np.zeros((n_groups, len(reasons)))
        np.add.at(per_group, group, per_cell[take])
        for g in np.flatnonzero(per_group.sum(axis=1) > 0):
            items = sorted(
                ((int(c), r) for r, c in zip(reasons, per_group[g], strict=True) if c > 0),
                key=lambda it: (-it[0], it[1]),
            )
            text[g] = "; ".join(f"{r}: {c}" for c, r in items)
    data["cost_unknown"] = pd.Series(text, dtype=object)

    # descriptive columns: from the first trial of each group (constant within a config)
    first = np.full(n_groups, len(pt), dtype=np.int64)
    np.minimum.at(first, group, cells["first"][take])
    first = np.minimum(first, max(len(pt) - 1, 0))
    for col in [c for c in DESCRIPTIVE if c in pt.columns]:
        data[col] = pt[col].iloc[first].astype(object).to_numpy() if len(pt) else None
    if "is_baseline" in pt:
        data["is_baseline"] = agg("baseline") > 0
    run_id = first_value(pt["run_id"]) if len(pt) else None
    for key in keys:
        data[key] = as_str_series(key_values[key]).to_numpy()
    p_codes, p_u = str_codes(pt["primary_scorer"])
    p_first = np.flatnonzero(p_codes >= 0)
    data["primary_scorer"] = p_u[p_codes[p_first[0]]] if len(p_first) else None
    for col in ("trials", "trials_succeeded", "primary_scored", "cost_known_trials"):
        data[col] = np.asarray(data[col]).astype(int)
    data["pass_k_tasks"] = np.asarray(data["pass_k_tasks"]).astype(int)
    out = pd.DataFrame(data, index=pd.RangeIndex(n_groups))
    out.insert(0, "run_id", run_id)

    front = [
        "run_id",
        "suite",
        *keys,
        "agent",
        "agent_kind",
        "model",
        "effort",
        "factory_ref",
        "is_baseline",
    ]
    metrics = [
        "trials",
        "trials_succeeded",
        "overall",
        "overall_ci_low",
        "overall_ci_high",
        "pass_rate",
        "pass_rate_ci_low",
        "pass_rate_ci_high",
        "primary_scorer",
        "primary_scored",
        "k",
        "pass_k_tasks",
        "pass_at_k",
        "pass_hat_k",
        "avg_cost_usd",
        "total_cost_usd",
        "cost_known_trials",
        "cost_coverage",
        "cost_unknown",
        "avg_duration_seconds",
        "avg_iterations",
        "scorer_cost_usd",
        "scored_share",
    ]
    per_score = [c for n in names for c in (score_col(n), scored_col(n), of_col(n)) if c in out]
    ordered = [c for c in front if c in out] + metrics + per_score
    return out[ordered].reset_index(drop=True)


def _keys_valid(key_values: dict[str, pd.Series], n_groups: int) -> np.ndarray:
    ok = np.ones(n_groups, dtype=bool)
    for values in key_values.values():
        ok &= values.notna().to_numpy(dtype=bool)
    return ok


def group_index(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """(group number per row, first row of each group, number of groups), groups sorted by keys."""
    combined = np.zeros(len(frame), dtype=np.int64)
    size = 1
    for key in keys:
        col = frame[key]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            col = as_categorical(col)
        codes = col.cat.codes.to_numpy().astype(np.int64)
        combined = combined * (len(col.cat.categories) + 1) + (codes + 1)
        size *= len(col.cat.categories) + 1
    uniq, inv = unique_inverse(combined)
    return inv, first_rows(inv, len(uniq)), len(uniq)


def add_baseline_deltas(table: pd.DataFrame, baseline_table: pd.DataFrame) -> pd.DataFrame:
    """delta_overall, delta_pass_rate, delta_avg_cost_usd against another run's config table."""
    base = baseline_table.set_index("config_id")
    ids = table["config_id"]
    b_overall = ids.map(base["overall"]).astype(float)
    b_pass = ids.map(base["pass_rate"]).astype(float)
    b_cost = ids.map(base["avg_cost_usd"]).astype(float)
    b_cov = ids.map(base["cost_coverage"]).astype(float)
    out = table.copy()
    out["delta_overall"] = out["overall"] - b_overall
    out["delta_pass_rate"] = out["pass_rate"] - b_pass
    full = (out["cost_coverage"] >= 1 - EPS) & (b_cov >= 1 - EPS)
    out["delta_avg_cost_usd"] = (out["avg_cost_usd"] - b_cost).where(full)
    return out


def config_table(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    baseline_table: pd.DataFrame | None = None,
    *,
    per_trial: pd.DataFrame | None = None,
    cells: ConfigCells | None = None,
) -> pd.DataFrame:
    """One row per config_id of one run (see module doc). `per_trial`: reuse trial_overall();
    `cells`: reuse config_cells(per_trial)."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "config_table")
    catalog = catalog_for(pt, scores)
    out = aggregate_trials(pt, ["config_id"], catalog, cells=cells)
    if baseline_table is not None:
        out = add_baseline_deltas(out, baseline_table)
    return out
