"""Performance of the derived tables on one million synthetic trials, read from Parquet.

Generates 50 tasks x 8 configs x 2,500 repetitions = 1,000,000 trial rows and, for five
scorers (checks, ci and three judge criteria), ~5,000,000 score rows plus 2 % rescore rows
(older rows superseded by newer ones), with numpy vectorized ops; writes them into a fresh
warehouse (a frozen run manifest, `trials/<run_id>/...` and `scores/<run_id>/...` Parquet in the
layout of `bench_pipeline.warehouse.layout`) and then, in a fresh child process, times the route
the product uses: `runs.derived.compute_derived` (read + every derived table) and prints each
step, the total and the child's peak RSS (VmHWM).

    .venv/bin/python perf/analysis.py [--tasks 50 --configs 8 --reps 2500]
        [--layout run|partition|trial] [--keep DIR] [--also-a5575a0]
    .venv/bin/python perf/analysis.py --warehouse DIR [--against OTHER_CHECKOUT --rounds N]

Each tree's analysis is timed twice: a first one (the run's per-trial cache removed: it reads
the trials and scores and rebuilds the cache) and a steady one (the cache built from the current
files: it reads that instead). `--warehouse DIR` measures a warehouse an earlier `--keep DIR`
wrote (no generating); `--against DIR` times another checkout's compute_derived on the same
files (e.g. the commit before: `git archive <commit> | tar -x -C DIR`), its first and steady
analyses alternating with this tree's over `--rounds` rounds of fresh processes, and prints the
median wall, CPU and peak RSS of each and this tree's ratios, first to first and steady to
steady (the machine's load moves wall time; same-round ratios and CPU time move less).

`--layout`: how the rows are split into files. `partition` is what a run writes for scores (one
file per partition and (re)score: `<config>/rep<N>/<rescore_id>.parquet`) with the trials of a
partition in one file too (what `runs.execute` leaves once a partition's trials have ended and
its files are joined); `trial` is what it writes for slow trials while they run (one file per
trial); `run` puts each table of the run in one file (what a compaction of a finished run
would leave: the product has none). Reading tens of thousands of files costs seconds by
itself (~1.3 ms a file), so the default is `run` and the others are reported apart.

Around the two analyses, a fresh process measures the floor under any analysis of the same
files: it lists them and decodes the columns compute_derived reads (pyarrow, every thread),
and computes nothing; its figure is the mean of a run before and a run after them, and the
analyses' times are printed as multiples of it.

The default shape has 50 tasks: a million trials as many tasks and few repetitions
(`--tasks 25000 --configs 8 --reps 5`) weighs the per-task work instead (the config x task
sums, the tags, the paired comparison's statistics over tasks, the manifest of 25,000 tasks).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _import_measured_package() -> None:
    """A measuring child starts as a `bench` process does: the package it measures (this tree,
    or `--tree`'s) imported before pyarrow, whose allocator that package's import may choose
    (read once, at pyarrow's first use of its default pool)."""
    argv = sys.argv[1:]
    if not any(flag in argv for flag in ("--measure", "--measure-floor", "--measure-reference")):
        return
    tree = argv[argv.index("--tree") + 1] if "--tree" in argv else Path(__file__).parents[1]
    sys.path.insert(0, str(Path(tree).resolve()))
    import bench_pipeline  # noqa: F401 - imported for its side effect on pyarrow's allocator


_import_measured_package()

import numpy as np  # noqa: E402 - after the measured package (above)
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RUN_ID = "perf-20250101T000000-0000"
ROW_GROUP = 65536
SCORERS = [
    ("checks", "checks", 1.0),
    ("ci", "ci", 1.0),
    ("llm_judge:correctness", "llm_judge", 0.6),
    ("llm_judge:efficiency", "llm_judge", 0.4),
    ("llm_judge:verbosity", "llm_judge", 0.0),
]
TAG_CHOICES = [[], ["api"], ["db"], ["api", "security"], ["concurrency", "db"], ["ui"]]
OUTCOMES = np.array(
    ["succeeded", "agent_error", "budget_exceeded", "invalidated", "workspace_error"], dtype=object
)
STATUSES = np.array(["scored", "error", "inconclusive", "not_scored", "missing"], dtype=object)


def _cat(codes: np.ndarray, names: list[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=names)


def generate(
    n_tasks: int = 50, n_configs: int = 8, reps: int = 2500, seed: int = 7, run_id: str = "run-perf"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Synthetic TRIALS and SCORES frames (the columns the results package reads).

    String columns of TRIALS are pandas `str` (as read from Parquet); the low-cardinality
    string columns of SCORES are categoricals (as read from dictionary-encoded Parquet) and
    its trial_id is an arrow-backed string column: no Python object per row anywhere.
    """
    rng = np.random.default_rng(seed)
    n = n_tasks * n_configs * reps
    task_idx = np.repeat(np.arange(n_tasks), n_configs * reps)
    config_idx = np.tile(np.repeat(np.arange(n_configs), reps), n_tasks)
    rep = np.tile(np.arange(1, reps + 1), n_tasks * n_configs).astype(np.int32)
    task_names = [f"task-{i:03d}" for i in range(n_tasks)]
    config_names = [f"cfg-{i}" for i in range(n_configs)]
    trial_arr = pc.binary_join_element_wise(
        pa.array(task_names).take(pa.array(task_idx)),
        pa.array(config_names).take(pa.array(config_idx)),
        pa.array(rep).cast(pa.string()),
        "/",
    )
    task_tags = [TAG_CHOICES[i % len(TAG_CHOICES)] for i in range(n_tasks)]
    tags_arr = pa.array(task_tags, type=pa.list_(pa.string())).take(pa.array(task_idx))

    outcome_i = rng.choice(len(OUTCOMES), size=n, p=[0.9, 0.05, 0.03, 0.01, 0.01])
    skill = 0.45 + 0.05 * config_idx + rng.normal(0, 0.1, n_tasks)[task_idx]
    cost = (0.05 + 0.04 * config_idx) * rng.lognormal(0, 0.3, n)
    unknown = (config_idx == n_configs - 1) & (rng.random(n) < 0.1)
    cost[unknown] = np.nan
    trials = pa.table({"trial_id": trial_arr}).to_pandas()
    trials.insert(0, "run_id", pd.Series(_cat(np.zeros(n, dtype=np.int8), [run_id])).astype("str"))
    strs = {
        "suite": "perf",
        "task_set_revision": "rev-1",
        "difficulty": "medium",
        "agent": "coder",
        "agent_kind": "anthropic",
        "effort": "medium",
    }
    for col, value in strs.items():
        trials[col] = pd.Series(_cat(np.zeros(n, dtype=np.int8), [value])).astype("str")
    trials["task_id"] = pd.Series(_cat(task_idx, task_names)).astype("str")
    trials["config_id"] = pd.Series(_cat(config_idx, config_names)).astype("str")
    trials["repetition"] = rep
    trials["tags"] = pd.Series(tags_arr.to_numpy(zero_copy_only=False), dtype=object)
    trials["holdout"] = (task_idx % 10) == 9
    trials["model"] = pd.Series(_cat(config_idx, [f"model-{c}" for c in config_names])).astype(
        "str"
    )
    trials["is_baseline"] = config_idx == 0
    trials["outcome"] = pd.Series(_cat(outcome_i, list(OUTCOMES))).astype("str")
    trials["iterations"] = rng.integers(1, 4, n).astype(np.int32)
    trials["cost_usd"] = cost
    trials["cost_unknown_reason"] = pd.Series(
        _cat(np.where(unknown, 0, -1), ["agent reported no usage"])
    ).astype("str")
    trials["duration_seconds"] = rng.gamma(4.0, 30.0, n) * (1 + 0.1 * config_idx)
    trials["attempt_no"] = np.ones(n, dtype=np.int32)

    n_s = len(SCORERS)
    t_rows = np.repeat(np.arange(n, dtype=np.int64), n_s)
    s_idx = np.tile(np.arange(n_s, dtype=np.int8), n)
    p_pass = np.clip(skill, 0.02, 0.98)[t_rows]
    value = (rng.random(n * n_s) < p_pass).astype(float)
    judge = s_idx >= 2
    value[judge] = np.round(np.clip(p_pass[judge] + rng.normal(0, 0.15, judge.sum()), 0, 1), 2)
    del p_pass
    failed = np.isin(outcome_i, [1, 2])[t_rows]
    value[failed] = 0.0
    status_i = rng.choice(len(STATUSES), size=n * n_s, p=[0.95, 0.01, 0.02, 0.01, 0.01])
    status_i[failed] = 0
    value[status_i != 0] = np.nan
    # 2 % of score rows were rescored a day later: the newer row supersedes the older one.
    redo = np.flatnonzero(rng.random(n * n_s) < 0.02)
    rows = np.concatenate([np.arange(n * n_s), redo])
    seconds = rng.integers(0, 3600, n * n_s)
    scored_at = np.concatenate([seconds, seconds[redo] + 86400])
    s_all = s_idx[rows]
    st = np.concatenate([status_i, np.zeros(len(redo), dtype=status_i.dtype)])
    val = np.concatenate([value, np.where(judge[redo], 0.5, 1.0)])
    tr = t_rows[rows]
    t0 = pd.Timestamp("2025-01-01", tz="UTC")
    scores = pa.table({"trial_id": trial_arr.take(pa.array(tr))}).to_pandas()
    scores.insert(
        0, "run_id", pd.Categorical.from_codes(np.zeros(len(tr), dtype=np.int8), [run_id])
    )
    scores["task_id"] = _cat(task_idx[tr], task_names)
    scores["config_id"] = _cat(config_idx[tr], config_names)
    scores["repetition"] = rep[tr]
    scores["scorer"] = _cat(s_all, [s[0] for s in SCORERS])
    group_names = list(dict.fromkeys(s[1] for s in SCORERS))
    group_of = np.array([group_names.index(s[1]) for s in SCORERS], dtype=np.int8)
    scores["scorer_group"] = _cat(group_of[s_all], group_names)
    scores["weight"] = np.array([s[2] for s in SCORERS])[s_all]
    scores["status"] = _cat(st.astype(np.int8), list(STATUSES))
    scores["value"] = val
    scores["cost_usd"] = np.where(s_all >= 2, 0.002, np.nan)
    scores["rescore_id"] = _cat(
        np.concatenate([np.zeros(n * n_s, dtype=np.int8), np.ones(len(redo), dtype=np.int8)]),
        ["initial", "rescore-1"],
    )
    scores["scored_at"] = t0 + pd.to_timedelta(scored_at, unit="s")
    return trials, scores


def _status_mib(field: str) -> float | None:
    """VmRSS / VmHWM from /proc (Linux); None elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def make_run(n_tasks: int, n_configs: int, reps: int, run_id: str = RUN_ID):  # noqa: ANN201
    """A frozen benchmark run whose tasks and configs are the generated ones (text tasks: no
    repository is needed to load it), as `bench run` would have stored it."""
    from bench_pipeline.formats.model import AgentSpec, Config, Launch, Prices, Suite, Task
    from bench_pipeline.formats.taskset import FrozenTaskSet
    from bench_pipeline.runs.benchmark_run import BenchmarkRun

    suite = Suite(name="perf", title="perf", agent="coder", repo=None, directory=Path("."))
    tasks = tuple(
        Task(
            id=f"task-{i:03d}",
            suite="perf",
            title=f"task {i}",
            prompt="-",
            repo=None,
            base_ref=None,
            base_sha=None,
            tags=tuple(TAG_CHOICES[i % len(TAG_CHOICES)]),
            holdout=(i % 10) == 9,
        )
        for i in range(n_tasks)
    )
    configs = tuple(
        Config(
            id=f"cfg-{i}",
            agent=AgentSpec(
                name="coder", kind="anthropic", model=f"model-cfg-{i}", effort="medium"
            ),
        )
        for i in range(n_configs)
    )
    launch = Launch(
        name="perf",
        suite=suite,
        configs=configs,
        tasks=tasks,
        repetitions=reps,
        scorers=tuple(s[0] for s in SCORERS),
    )
    return BenchmarkRun(
        run_id=run_id,
        created_at="2025-01-01T00:00:00+00:00",
        launch=launch,
        taskset=FrozenTaskSet("perf", "rev-1", tasks, {}),
        prices=Prices(),
        launch_path="perf.yaml",
        agent_file_hashes={},
    )


def _fit(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    cols = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def write_warehouse(
    root: Path, trials: pd.DataFrame, scores: pd.DataFrame, layout_name: str = "run"
) -> int:
    """Store the frames as a run's Parquet files (schemas of warehouse.schemas); returns the
    number of files written."""
    from bench_pipeline.runs.benchmark_run import save_run
    from bench_pipeline.warehouse import layout, schemas
    from bench_pipeline.warehouse.store import Warehouse

    wh = Warehouse(root)
    run_id = str(trials["run_id"].iloc[0])
    n_tasks = trials["task_id"].nunique()
    n_configs = trials["config_id"].nunique()
    save_run(make_run(n_tasks, n_configs, int(trials["repetition"].max()), run_id), wh)
    t = _fit(trials, schemas.TRIALS)
    s = _fit(scores.assign(**{c: scores[c].astype(str) for c in SCORE_STR}), schemas.SCORES)
    base_t, base_s = root / "trials" / run_id, root / "scores" / run_id
    if layout_name == "run":
        base_t.mkdir(parents=True)
        base_s.mkdir(parents=True)
        # row groups of 64k rows, as a compaction would write (not one 5M-row group)
        pq.write_table(t, base_t / "all.parquet", row_group_size=ROW_GROUP)
        pq.write_table(s, base_s / "all.parquet", row_group_size=ROW_GROUP)
        return 2
    written = 0
    t_key = _group_rows(
        t, ["config_id", "repetition"] + (["task_id"] if layout_name == "trial" else [])
    )
    for key, rows in t_key:
        part = (
            layout.trial_part(key[0], key[1], key[2])
            if layout_name == "trial"
            else f"{layout.partition_dir(key[0], key[1])}/trials"
        )
        target = base_t / f"{part}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t.take(rows), target)
        written += 1
    for key, rows in _group_rows(s, ["config_id", "repetition", "rescore_id"]):
        target = base_s / f"{layout.score_part(key[0], key[1], key[2])}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(s.take(rows), target)
        written += 1
    return written


SCORE_STR = ["run_id", "task_id", "config_id", "scorer", "scorer_group", "status", "rescore_id"]


def _group_rows(table: pa.Table, keys: list[str]) -> list[tuple[tuple, np.ndarray]]:
    frame = table.select(keys).to_pandas()
    return [
        (k if isinstance(k, tuple) else (k,), np.asarray(idx))
        for k, idx in frame.groupby(keys, sort=True).indices.items()
    ]


def measure(root: Path, run_id: str) -> int:
    """Child process: compute_derived on the warehouse at `root`, timed per step."""
    start = time.perf_counter()
    from bench_pipeline.runs.derived import compute_derived
    from bench_pipeline.warehouse.store import Warehouse

    import_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), os.times()
    derived = compute_derived(Warehouse(root), run_id)
    total = time.perf_counter() - start
    after = os.times()
    cpu_s = (after.user - cpu.user) + (after.system - cpu.system)
    hwm = _status_mib("VmHWM")
    width = max(len(k) for k in derived.timings) + 2
    print(f"  {'(import runs.derived)':<{width}}  {import_s:7.3f} s")
    for label, seconds in derived.timings.items():
        print(f"  {label:<{width}}  {seconds:7.3f} s")
    print(f"  {'TOTAL compute_derived (read + every derived table)':<{width}}  {total:7.3f} s")
    # CPU seconds (user + system, every thread): what a loaded machine inflates least
    print(f"  {'CPU time of compute_derived (user + system)':<{width}}  {cpu_s:7.3f} s")
    peak = hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the measuring process (VmHWM): {peak:,.0f} MiB")
    print(f"summary: wall={total:.4f} cpu={cpu_s:.4f} hwm={peak:.1f}")
    table = derived.tables["config_table"]
    print(
        table[
            ["config_id", "trials", "overall", "pass_rate", "avg_cost_usd", "cost_coverage"]
        ].to_string(index=False)
    )
    return 0


def measure_floor(root: Path, run_id: str) -> int:
    """Child process: the floor under any analysis of these files. It lists the run's trial
    and score files and decodes, with every thread, the columns compute_derived reads from
    them (string columns dictionary-encoded, as it reads them), and computes nothing. Both
    this child and `measure`'s import pandas and pyarrow before their clocks start, so
    compute_derived's time above this floor is what it does with the rows. (Its peak RSS is
    no floor for memory: it holds every decoded row at once, where the analysis streams the
    score rows.)"""
    import pyarrow.dataset as ds

    from bench_pipeline.results.scores import TRIAL_COLUMNS
    from bench_pipeline.runs.derived import (
        PER_TRIAL_UNUSED,
        SCORE_CATEGORICAL,
        SCORE_READ,
        TRIAL_CATEGORICAL,
        TRIAL_KEY,
    )
    from bench_pipeline.warehouse.store import Warehouse

    reads = {
        "trials": (
            [c for c in (*TRIAL_COLUMNS, "attempt_no") if c not in PER_TRIAL_UNUSED],
            TRIAL_CATEGORICAL,
        ),
        "scores": (
            [*(c for c in SCORE_READ if c != "trial_id"), *TRIAL_KEY],
            (*SCORE_CATEGORICAL, "task_id", "config_id"),
        ),
    }
    warehouse = Warehouse(root)
    start, cpu = time.perf_counter(), os.times()
    rows = 0
    for table, (columns, dictionary) in reads.items():
        files = [str(f) for f in warehouse.files(table, run_id)]
        if not files:
            continue
        schema = pq.read_schema(files[0])
        fmt = ds.ParquetFileFormat(
            read_options=ds.ParquetReadOptions(dictionary_columns=list(dictionary))
        )
        present = [c for c in columns if c in schema.names]
        rows += ds.dataset(files, format=fmt).to_table(columns=present).num_rows
    total = time.perf_counter() - start
    after = os.times()
    cpu_s = (after.user - cpu.user) + (after.system - cpu.system)
    peak = _status_mib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  list the files, decode the columns compute_derived reads ({rows:,} rows)  {total:7.3f} s"
    )
    print(f"  CPU time (user + system)  {cpu_s:7.3f} s")
    print(f"peak RSS of the measuring process (VmHWM): {peak:,.0f} MiB")
    print(f"summary: wall={total:.4f} cpu={cpu_s:.4f} hwm={peak:.1f}")
    return 0


def measure_reference(root: Path, run_id: str) -> int:
    """Child process: the same tables by commit a5575a0's route (`Warehouse.read` of every
    column into pandas, latest rows step by step, then the table functions), the oracle of
    the tests (bench_pipeline_tests/previous_route.py)."""
    start = time.perf_counter()
    from bench_pipeline.warehouse.store import Warehouse
    from bench_pipeline_tests import previous_route as reference

    import_s = time.perf_counter() - start
    start = time.perf_counter()
    wh = Warehouse(root)
    trials, scores = reference.run_rows(wh, run_id)
    read_s = time.perf_counter() - start
    del trials, scores
    start = time.perf_counter()
    reference.derived_tables(wh, run_id)
    total = time.perf_counter() - start
    print(f"  (import a5575a0 results)  {import_s:7.3f} s")
    print(f"  read trials + scores (Warehouse.read, every column)  {read_s:7.3f} s")
    print(f"  TOTAL a5575a0 derived tables (read + every table)  {total:7.3f} s")
    print(f"peak RSS of the measuring process (VmHWM): {_status_mib('VmHWM') or 0:,.0f} MiB")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--configs", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2500)
    parser.add_argument("--layout", choices=["run", "partition", "trial"], default="run")
    parser.add_argument("--keep", type=Path, help="write the warehouse here and keep it")
    parser.add_argument(
        "--also-a5575a0",
        action="store_true",
        help="also time commit a5575a0's route on the same files (the before figure)",
    )
    parser.add_argument(
        "--warehouse", type=Path, help="measure a warehouse an earlier --keep wrote (no generating)"
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout of this project (e.g. `git archive <commit> | tar -x -C DIR`): "
        "time its compute_derived on the same files too, interleaved with this tree's",
    )
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (--against)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure-reference", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure-floor", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        if args.tree is not None:  # the other checkout's package first on the path
            sys.path.insert(0, str(args.tree.resolve()))
        return measure(args.measure, RUN_ID)
    if args.measure_reference is not None:
        return measure_reference(args.measure_reference, RUN_ID)
    if args.measure_floor is not None:
        return measure_floor(args.measure_floor, RUN_ID)

    problem = _unusable_directory(args.keep, args.warehouse)
    if problem:
        print(f"perf/analysis.py: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        root = args.warehouse or args.keep or Path(tmp) / "warehouse"
        if args.warehouse is None:
            start = time.perf_counter()
            trials, scores = generate(args.tasks, args.configs, args.reps, run_id=RUN_ID)
            gen_s = time.perf_counter() - start
            print(
                f"generated {len(trials):,} trials and {len(scores):,} score rows in {gen_s:.2f} s"
            )
            start = time.perf_counter()
            files = write_warehouse(root, trials, scores, args.layout)
            size = sum(p.stat().st_size for p in root.rglob("*.parquet")) / 2**20
            print(
                f"wrote {files:,} Parquet files ({size:,.0f} MiB, layout {args.layout}) in "
                f"{time.perf_counter() - start:.2f} s"
            )
            del trials, scores
        here = Path(__file__).resolve().parents[1]
        env = dict(os.environ, PYTHONPATH=str(here))
        if args.against is not None:
            return _interleaved(root, here, args.against, max(args.rounds, 1), env)
        # The floor before and after the analyses, its figure the mean of the two: a drift in
        # the machine's load between them moves both alike.
        steps = [
            ("floor", "plain read (the floor): the same files' columns decoded, nothing computed"),
            ("first", "compute_derived (this commit), first analysis: builds the per-trial cache"),
            ("steady", "compute_derived (this commit), steady: the cache is current"),
            ("floor", "plain read (the floor) again"),
        ]
        seen: dict[str, list[float]] = {}
        for kind, label in steps:
            if kind == "first":
                drop_cache(root)
            print(f"{label}, in a fresh process:", flush=True)
            flag = "--measure-floor" if kind == "floor" else "--measure"
            child = subprocess.run(
                [sys.executable, __file__, flag, str(root)],
                env=env,
                check=False,
                capture_output=True,
                text=True,
            )
            print(child.stdout, end="", flush=True)
            print(child.stderr, end="", file=sys.stderr, flush=True)
            if child.returncode != 0:
                return child.returncode
            line = next(x for x in child.stdout.splitlines() if x.startswith("summary: "))
            seen.setdefault(kind, []).append(float(line.split()[1].removeprefix("wall=")))
        floor = statistics.fmean(seen["floor"])
        print(
            f"against the floor ({floor:.3f} s, mean of the two): first analysis "
            f"{seen['first'][0] / floor:.2f}x, steady {seen['steady'][0] / floor:.2f}x"
        )
        if args.also_a5575a0:
            print("a5575a0's route on the same files, in a fresh process:")
            child = subprocess.run(
                [sys.executable, __file__, "--measure-reference", str(root)], env=env, check=False
            )
        return child.returncode


def _unusable_directory(keep: Path | None, warehouse: Path | None) -> str | None:
    """Why `--keep` or `--warehouse` cannot be used, before anything is generated (a kept
    warehouse is never written over: its files are what later runs are compared on)."""
    if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        return (
            f"--keep {keep}: not an empty directory; name a new one (or measure it with "
            "--warehouse)"
        )
    from bench_pipeline.warehouse import layout

    if warehouse is not None and not (warehouse / layout.manifest(RUN_ID)).is_file():
        return f"--warehouse {warehouse}: no run {RUN_ID} there; write one first with --keep DIR"
    return None


def drop_cache(root: Path) -> None:
    """Remove the run's per-trial cache (the next analysis is a first one: it rebuilds it)."""
    from bench_pipeline.warehouse import layout

    (root / layout.per_trial_cache(RUN_ID)).unlink(missing_ok=True)


def _interleaved(root: Path, here: Path, other: Path, rounds: int, env: dict) -> int:
    """This tree's and `other`'s compute_derived on the same files, alternating, each run in a
    fresh process, each tree twice per round: a first analysis (the per-trial cache removed
    before: it rebuilds it) and a steady one (the cache it just built). Per round wall, CPU
    and peak RSS, then the medians and this tree's ratios to `other`'s, first to first and
    steady to steady. (Both trees' caches live at one path: each first analysis must drop
    the cache, or it reads what the other tree's steady run left when their keys agree.)"""
    other = other.resolve()
    trees = [("this tree", here), (f"against {other}", other)]
    seen: dict[str, list[tuple[float, float, float]]] = {}
    for n in range(rounds):
        for name, tree in trees if n % 2 == 0 else trees[::-1]:
            for kind in ("first", "steady"):  # (first, which makes the cache, then steady)
                label = f"{name}, {kind}"
                if kind == "first":
                    drop_cache(root)
                cmd = [sys.executable, __file__, "--measure", str(root), "--tree", str(tree)]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(out.stdout + out.stderr)
                    return out.returncode
                lines = out.stdout.splitlines()
                if n == 0:
                    print(f"{label} ({tree}), round 1:")
                    print(
                        "\n".join(
                            lines[: next(i for i, x in enumerate(lines) if x.startswith("summary"))]
                        )
                    )
                line = next(x for x in lines if x.startswith("summary: "))
                fields = dict(kv.split("=") for kv in line.split()[1:])
                got = (float(fields["wall"]), float(fields["cpu"]), float(fields["hwm"]))
                seen.setdefault(label, []).append(got)
                print(
                    f"round {n + 1} {label}: wall {got[0]:.3f} s, CPU {got[1]:.3f} s, peak {got[2]:,.0f} MiB"
                )
    med = {
        label: [statistics.median(v[i] for v in got) for i in range(3)]
        for label, got in seen.items()
    }
    print(f"medians over {rounds} rounds (first, steady: this tree / against):")
    for i, name in enumerate(("wall s", "CPU s", "peak RSS MiB")):
        cells = []
        for kind in ("first", "steady"):
            mine, theirs = med[f"this tree, {kind}"][i], med[f"{trees[1][0]}, {kind}"][i]
            cells.append(f"{kind} {mine:9.3f} / {theirs:9.3f} = {mine / theirs:.3f}")
        print(f"  {name:<13} " + ";  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
