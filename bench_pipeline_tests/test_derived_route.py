"""compute_derived reads only the columns it needs, as compact frames, and gives the same tables
as the previous route (every column read whole, latest rows taken step by step:
bench_pipeline_tests/previous_route.py) to 1e-9.

The data is perf/analysis.py's generator (outcomes, unknown costs, judge criteria with weights,
rescored rows superseding older ones), stored in a real warehouse in the layouts a run writes,
plus resumed trials (a second attempt of some trials) and a baseline run for the regressions.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from bench_pipeline.runs.derived import (
    DERIVED_TABLES,
    STORE_BESIDE,
    compute_derived,
    store_derived,
)
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline_tests import previous_route as reference
from bench_pipeline_tests.perf_scripts import perf_analysis

ROOT = Path(__file__).resolve().parents[1]
ANNOTATIONS = {"is_control", "judge_grades_itself"}  # added by compute_derived, both versions


PERF = perf_analysis()


def _resumed(trials: pd.DataFrame) -> pd.DataFrame:
    """A second attempt of every 7th trial with another outcome and cost (a resumed run)."""
    again = trials.iloc[::7].copy()
    again["attempt_no"] = 2
    again["outcome"] = np.where(again["outcome"] == "succeeded", "agent_error", "succeeded")
    again["cost_usd"] = again["cost_usd"] * 2
    return again


def _warehouse(
    root: Path,
    layout: str,
    seed: int,
    run_id: str,
    reps: int = 4,
    orphan: bool = False,
    stray: str | None = None,
) -> Warehouse:
    trials, scores = PERF.generate(7, 3, reps, seed=seed, run_id=run_id)
    PERF.write_warehouse(root, trials, scores, layout)
    wh = Warehouse(root)
    again = _resumed(trials)
    first = again.iloc[0]
    wh.write("trials", again, run_id, f"{first['config_id']}/rep{int(first['repetition'])}/zz")
    # an `assert` scorer with per-turn details for the scenario turns table, rescored once;
    # the newer row is written FIRST, so a route that took the last row read instead of the
    # latest by time gets the superseded value
    rows = []
    for _, t in trials.iloc[:24].iterrows():
        for at, passed in (("2025-01-03", True), ("2025-01-01", t["repetition"] % 2 == 0)):
            details = {"turns": [{"turn": 1, "passed": bool(passed), "latency_ms": 12.5}]}
            rows.append(
                {
                    "run_id": run_id,
                    "trial_id": t["trial_id"],
                    "task_id": t["task_id"],
                    "config_id": t["config_id"],
                    "repetition": int(t["repetition"]),
                    "scorer": "assert",
                    "scorer_group": "assert",
                    "weight": 1.0,
                    "status": "scored",
                    "value": 1.0 if passed else 0.0,
                    "details_json": json.dumps(details),
                    "rescore_id": "initial" if at == "2025-01-01" else "rescore-2",
                    "scored_at": pd.Timestamp(at, tz="UTC"),
                }
            )
    wh.write("scores", rows, run_id, "asserts/all")
    if orphan:  # a score of a trial that has no row: the general route
        orphan = dict(rows[0], trial_id="ghost/cfg-0/1", task_id="ghost", scorer="checks")
        wh.write("scores", [orphan], run_id, "orphans/all")
    if stray == "null_scorer":  # a row naming no scorer: the general route drops it
        wh.write("scores", [dict(rows[1], scorer=None)], run_id, "stray/all")
    if stray == "tie":  # same time as the row it supersedes: the row read last wins
        first_row = rows[2]
        wh.write("scores", [dict(first_row, value=0.25, status="scored")], run_id, "zz/tie")
    return wh


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, list | tuple | np.ndarray) or isinstance(b, list | tuple | np.ndarray):
        return list(a) == list(b)
    missing_a = a is None or (isinstance(a, float) and math.isnan(a)) or a is pd.NA
    missing_b = b is None or (isinstance(b, float) and math.isnan(b)) or b is pd.NA
    if missing_a or missing_b:
        return missing_a and missing_b
    if isinstance(a, int | float | np.number) and isinstance(b, int | float | np.number):
        return abs(float(a) - float(b)) <= 1e-9
    return a == b


def assert_same_table(name: str, new: pd.DataFrame, old: pd.DataFrame) -> None:
    extra = set(new.columns) - set(old.columns)
    assert extra <= ANNOTATIONS | {"run_id"}, (name, extra)
    assert [c for c in new.columns if c in old.columns] == [
        c for c in old.columns if c in new.columns
    ], name
    assert set(old.columns) <= set(new.columns), (name, set(old.columns) - set(new.columns))
    assert len(new) == len(old), (name, len(new), len(old))
    for col in old.columns:
        for i, (a, b) in enumerate(zip(new[col].tolist(), old[col].tolist(), strict=True)):
            assert _same_value(a, b), f"{name}.{col} row {i}: {a!r} != {b!r}"


# (layout, repetitions, orphan score): 24 repetitions in partitions are > 64 score files (many
# small files, each with its own dictionary of trial ids: more than FEW_FILES, which one
# trial's file per trial exceeds too)
# `stray`: a row without a scorer (the general route), or a rescore at the very time of the row
# it supersedes in a file read after it (the tie goes to the row read last)
# `group`: many small files are read that many at a time (columns.GROUP_FILES, 256 as shipped:
# one group here); 16 reads these runs' files in several groups, each joined before the next;
# ("bytes", N): a group ends at N bytes on disk (columns.GROUP_BYTES: big files, few per group);
# ("big", N): files of N bytes on average count as big (columns.BIG_FILE): the score rows of
# more than FEW_FILES files are read batch by batch, file by file, not a group at a time
@pytest.mark.parametrize(
    ("layout", "reps", "orphan", "stray", "group"),
    [
        ("trial", 4, False, None, None),
        ("run", 4, True, None, None),
        ("run", 4, False, "tie", None),
        ("run", 4, False, "null_scorer", None),
        ("partition", 24, False, None, None),
        ("partition", 24, True, None, None),
        ("partition", 24, False, "tie", None),
        ("partition", 24, False, None, 16),
        ("partition", 24, True, None, 16),
        ("partition", 24, False, "tie", 16),
        ("partition", 24, False, "tie", ("bytes", 20_000)),
        ("trial", 4, True, None, ("bytes", 20_000)),
        ("partition", 24, False, "tie", ("big", 1)),
        ("partition", 24, True, None, ("big", 1)),
    ],
)
def test_derived_tables_equal_the_previous_implementation(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    reps: int,
    orphan: bool,
    stray: str | None,
    group: int | tuple[str, int] | None,
) -> None:
    from bench_pipeline.warehouse import columns

    if isinstance(group, tuple):
        monkeypatch.setattr(columns, "GROUP_BYTES" if group[0] == "bytes" else "BIG_FILE", group[1])
    elif group is not None:
        monkeypatch.setattr(columns, "GROUP_FILES", group)
    groups = _count_groups(monkeypatch, columns)
    streamed = _count_streamed(monkeypatch, columns)
    run_id, base_id = "perf-20250102T000000-0001", "perf-20250101T000000-0000"
    _warehouse(tmp_path, layout, seed=3, run_id=base_id, reps=reps)
    wh = _warehouse(tmp_path, layout, seed=11, run_id=run_id, reps=reps, orphan=orphan, stray=stray)
    assert (len(wh.files("scores", run_id)) > 64) == (layout == "partition")

    derived = compute_derived(wh, run_id, baseline_run_id=base_id)
    # the analysis counts the runs' tasks and reads none (they are in a file of their own)
    assert not derived.run.taskset.tasks.loaded and len(derived.run.taskset.tasks) == 7
    old, old_recs = reference.derived_tables(
        wh, run_id, base_id, {"overall": 0.05, "cost": 0.25}, suite="perf"
    )
    assert set(derived.tables) == set(DERIVED_TABLES) == set(old)
    for name in DERIVED_TABLES:
        assert_same_table(name, derived.tables[name], old[name])
    assert derived.recommendations == old_recs
    big = isinstance(group, tuple) and group[0] == "big"
    if group is not None and not big:  # (the reads were split as the case says)
        assert max(groups) > 1
    # (more than FEW_FILES score files read file by file only when they count as big)
    assert (max(streamed) > columns.FEW_FILES) == big
    # Every trial id is its triple, so the trials are keyed by integers; the score rows are
    # placed by them unless one names no trial (an orphan) or no scorer, which take the ids as
    # strings and then the general route.
    assert KEYED in derived.timings
    assert (BY_ID_STRINGS not in derived.timings) == (not orphan and stray != "null_scorer")
    # the data exercises what it should: rescored cells, resumed trials, every table non-empty
    assert len(derived.tables["regressions"]) == 2 * 3
    assert len(derived.tables["scenario_turns"]) > 0
    assert len(derived.tables["paired_comparison"]) == 2
    assert derived.tables["config_table"]["trials"].sum() == 7 * 3 * reps
    # the stored tables read back as they were computed
    store_derived(wh, derived)
    stored = wh.read("config_table", run_id)
    assert stored["overall"].tolist() == pytest.approx(
        derived.tables["config_table"]["overall"].tolist(), abs=1e-12
    )
    # (the grid's lists of trial ids are an Arrow column, written and read back as lists)
    grid = wh.read("task_grid", run_id)
    assert [list(ids) for ids in grid["trial_ids"]] == old["task_grid"]["trial_ids"].tolist()


def _count_groups(monkeypatch: pytest.MonkeyPatch, columns: ModuleType) -> list[int]:
    """How many groups each grouped read of the test split its files into (appended)."""
    counts: list[int] = [0]
    split = columns._file_groups

    def counted(files: list[Path]) -> Iterator[list[Path]]:
        groups = list(split(files))
        counts.append(len(groups))
        return iter(groups)

    monkeypatch.setattr(columns, "_file_groups", counted)
    return counts


def _count_streamed(monkeypatch: pytest.MonkeyPatch, columns: ModuleType) -> list[int]:
    """How many files each file-by-file read of the test took (appended)."""
    counts: list[int] = [0]
    read = columns._file_batches

    def counted(files: list[Path], *args: object) -> Iterator[object]:
        counts.append(len(files))
        return read(files, *args)

    monkeypatch.setattr(columns, "_file_batches", counted)
    return counts


KEYED = "read trials, key them by task, config and repetition"
BY_ID_STRINGS = "read trials + the scores' trial ids"


@pytest.mark.parametrize("case", ["every id", "the last id", "a second id on a triple"])
@pytest.mark.parametrize("layout", ["run", "partition"])
def test_trials_whose_ids_are_not_their_triples_are_looked_up_by_id(
    tmp_path: Path, layout: str, case: str
) -> None:
    """A warehouse whose trial ids are not `<task>/<config>/<rep>` (hand-written, or from a
    tool of its own) is not keyed by the triple: the ids are looked up as strings, and the
    tables still equal the previous implementation's. One such id among triples is enough
    (the ids are checked beside the keyed pass over the scores, which then succeeds: its
    result must still be thrown away), and it matters where two trials share a triple: keyed,
    they would count as two attempts of one trial."""
    run_id = "perf-20250102T000000-0001"
    trials, scores = PERF.generate(5, 3, 6, seed=5, run_id=run_id)
    last = str(trials["trial_id"].iloc[-1])
    if case == "a second id on a triple":  # the last trial again, under another id
        trials = pd.concat([trials, trials.iloc[[-1]].assign(trial_id="another")])
        again = scores[scores["trial_id"].astype(str) == last].assign(trial_id="another")
        scores = pd.concat([scores, again])
    else:
        every = case == "every id"
        for frame in (trials, scores):
            ids = frame["trial_id"].astype(str)
            frame["trial_id"] = "t-" + ids if every else ids.where(ids != last, "t-" + last)
    PERF.write_warehouse(tmp_path, trials, scores, layout)
    wh = Warehouse(tmp_path)

    derived = compute_derived(wh, run_id)
    assert KEYED not in derived.timings and BY_ID_STRINGS in derived.timings
    old, old_recs = reference.derived_tables(
        wh, run_id, None, {"overall": 0.05, "cost": 0.25}, suite="perf"
    )
    for name in DERIVED_TABLES:
        assert_same_table(name, derived.tables[name], old[name])
    assert derived.recommendations == old_recs
    extra = case == "a second id on a triple"
    assert derived.tables["config_table"]["trials"].sum() == 5 * 3 * 6 + extra


@pytest.mark.parametrize("lookup", ["dict", "index_in"])
def test_trial_keys_place_rows_as_the_id_lookup_does(
    lookup: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TrialKeys against key_rows on the same trials and score rows, repeated (resumed) trials
    included; a score row whose triple names no trial, and trials with a missing triple part
    or an id that is not their triple, are refused (None), never placed elsewhere. A batch's
    dictionary entries are looked up in a dict of the known values (a few entries, or a few
    known values) or by Arrow's index_in (many of both): both routes give the same rows."""
    import pyarrow as pa

    from bench_pipeline.warehouse import columns
    from bench_pipeline.warehouse.columns import TrialKeys, ids_are_triples, key_rows

    if lookup == "index_in":
        monkeypatch.setattr(columns, "_FEW_KNOWN", 0)
        monkeypatch.setattr(columns, "_FEW_OF", 10**9)
    calls = []
    real_index_in = columns.pc.index_in
    monkeypatch.setattr(
        columns.pc, "index_in", lambda *a, **k: calls.append(1) or real_index_in(*a, **k)
    )

    ids = ["a/x/1", "b/x/1", "a/y/2", "a/x/1", "b/y/1"]  # a/x/1 twice: a resumed trial
    trials = pd.DataFrame(
        {
            "task_id": pd.Categorical([i.split("/")[0] for i in ids]),
            "config_id": pd.Categorical([i.split("/")[1] for i in ids]),
            "repetition": np.array([int(i.split("/")[2]) for i in ids], dtype=np.int32),
        }
    )
    t_ids = pa.chunked_array([pa.array(ids[:2]), pa.array(ids[2:])])
    keys = TrialKeys.of(trials, t_ids)
    assert keys is not None
    score_ids = ["b/y/1", "a/x/1", "a/y/2", "b/x/1", "a/x/1"]
    batch = pa.RecordBatch.from_pydict(
        {
            "task_id": pa.array([i.split("/")[0] for i in score_ids]).dictionary_encode(),
            "config_id": pa.array([i.split("/")[1] for i in score_ids]).dictionary_encode(),
            "repetition": pa.array([int(i.split("/")[2]) for i in score_ids], pa.int32()),
        }
    )
    first, rows = key_rows(pa.chunked_array([pa.array(score_ids).dictionary_encode()]), t_ids)
    assert keys.first.tolist() == first.tolist() == [0, 1, 2, 0, 4]
    assert keys.rows(batch).tolist() == rows.tolist() == [4, 0, 2, 1, 0]
    calls.clear()  # (new dictionaries: not the last batch's, which are not looked up again)
    again = pa.RecordBatch.from_pydict(
        {name: pa.array(batch.column(name).to_pylist()[::-1]) for name in batch.schema.names}
    )
    encoded = [again.column(i).dictionary_encode() for i in (0, 1)]
    again = again.set_column(0, "task_id", encoded[0]).set_column(1, "config_id", encoded[1])
    assert keys.rows(again).tolist() == [0, 1, 2, 0, 4]
    assert bool(calls) == (lookup == "index_in")  # (the route the case names was taken)

    ghost = pa.RecordBatch.from_pydict(
        {
            "task_id": pa.array(["a", "c"]).dictionary_encode(),  # task c has no trial
            "config_id": pa.array(["x", "x"]).dictionary_encode(),
            "repetition": pa.array([1, 1], pa.int32()),
        }
    )
    assert keys.rows(ghost) is None
    no_such_rep = ghost.set_column(0, "task_id", pa.array(["a", "a"]).dictionary_encode())
    assert keys.rows(no_such_rep.set_column(2, "repetition", pa.array([1, 9], pa.int32()))) is None
    assert keys.rows(no_such_rep.set_column(2, "repetition", pa.array([1, 2], pa.int32()))) is None
    assert keys.rows(no_such_rep.set_column(2, "repetition", pa.array([0, 1], pa.int32()))) is None
    unknown_config = no_such_rep.set_column(
        1, "config_id", pa.array(["x", "z"]).dictionary_encode()
    )
    assert (
        keys.rows(unknown_config.set_column(2, "repetition", pa.array([1, 1], pa.int32()))) is None
    )
    # a dictionary entry that names no trial but no row uses (a slice of a bigger batch)
    unused = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["a", "c"]))
    sliced = pa.RecordBatch.from_arrays(
        [unused, pa.array(["x", "y"]).dictionary_encode(), pa.array([1, 2], pa.int32())],
        names=["task_id", "config_id", "repetition"],
    )
    assert keys.rows(sliced).tolist() == [0, 2]
    assert TrialKeys.of(trials, pa.chunked_array([pa.array([*ids[:4], "b/y/2"])])) is None
    missing = trials.assign(task_id=pd.Categorical(["a", None, "a", "a", "b"]))
    assert TrialKeys.of(missing, t_ids) is None
    # checked later (on the caller's thread of choice): the keys are made whatever the ids,
    # and the check, a slice of rows at a time, finds a wrong id in any slice, the last too
    assert keys.id_check()()  # (checked in `of` already)
    wrong = pa.chunked_array([pa.array([*ids[:4], "b/y/2"])])
    deferred = TrialKeys.of(trials, wrong, check_ids=False)
    assert deferred is not None and deferred.id_check()() is False
    assert TrialKeys.of(trials, t_ids, check_ids=False).id_check()() is True
    names = pa.array(["a", "b"]), pa.array(["x", "y"])
    codes = np.array([0, 1, 0, 0, 1], dtype=np.int8), np.array([0, 0, 1, 0, 1], dtype=np.int8)
    reps = trials["repetition"].to_numpy()
    for sliced in (1, 2, 5):
        assert ids_are_triples(t_ids, *names, *codes, reps, slice_rows=sliced)
        assert not ids_are_triples(wrong, *names, *codes, reps, slice_rows=sliced)
    deferred.release()
    with pytest.raises(RuntimeError, match="after release"):
        deferred.id_check()()


def test_mcnemar_without_scipy_matches_scipy() -> None:
    from scipy import stats

    from bench_pipeline.results.effects import mcnemar_p

    for n in [*range(1, 120), 1000, 4321, 99999]:
        for b in {b for b in (0, 1, 2, n // 3, n // 2, (n + 1) // 2, n - 1, n) if b <= n}:
            want = stats.binomtest(b, n, 0.5).pvalue
            assert mcnemar_p(b, n - b) == pytest.approx(want, abs=1e-9, rel=0), (b, n)


def _analysis_process(*args: str) -> subprocess.CompletedProcess[str]:
    """perf/analysis.py run in its own process, on this checkout (whatever its exit code)."""
    import os
    import sys

    return subprocess.run(
        [sys.executable, str(ROOT / "perf" / "analysis.py"), *args],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _analysis(*args: str) -> str:
    """perf/analysis.py's standard output, once it has exited 0."""
    done = _analysis_process(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_perf_script_times_both_routes_on_a_small_warehouse(tmp_path: Path) -> None:
    """perf/analysis.py end to end, small: both routes run and print their totals and peaks."""
    args = ["--tasks", "4", "--configs", "2", "--reps", "3", "--layout", "partition"]
    out = _analysis(*args, "--also-a5575a0")
    assert "generated 24 trials" in out
    assert "TOTAL compute_derived (read + every derived table)" in out
    assert "TOTAL a5575a0 derived tables" in out
    # this commit twice (the first analysis builds the per-trial cache, the steady one reads
    # it), then the old route
    assert "first analysis: builds the per-trial cache" in out and "store the per-trial" in out
    assert "per-trial results + config x task sums (cached)" in out
    # the floor (the same files' columns decoded, nothing computed) before and after the two
    # analyses, which are printed as multiples of it: every score and trial row decoded
    assert out.count("plain read (the floor)") == 2
    assert out.count("list the files, decode the columns compute_derived reads") == 2
    generated = re.search(r"generated 24 trials and ([\d,]+) score rows", out)
    decoded = re.findall(r"compute_derived reads \(([\d,]+) rows\)", out)
    assert generated and decoded == [f"{24 + int(generated[1].replace(',', '')):,}"] * 2
    assert re.search(
        r"against the floor \([\d.]+ s, mean of the two\): first analysis "
        r"[\d.]+x, steady [\d.]+x",
        out,
    )
    assert out.count("peak RSS of the measuring process (VmHWM)") == 5
    assert "paired comparison" in out and "config table by tag" in out


def test_perf_script_measures_a_kept_warehouse_against_another_checkout(tmp_path: Path) -> None:
    """--keep, then --warehouse (no generating) with --against (here this very checkout) and
    --rounds: both trees timed on the same files, interleaved, with the medians' ratios."""
    kept = tmp_path / "wh"
    _analysis("--tasks", "3", "--configs", "2", "--reps", "2", "--keep", str(kept))
    out = _analysis("--warehouse", str(kept), "--against", str(ROOT), "--rounds", "2")
    assert "generated" not in out  # the kept warehouse, not a new one
    # each tree's first and steady analyses, every round
    assert out.count("round 1 ") == 4 and out.count("round 2 ") == 4
    assert out.count("round 2 this tree, steady") == 1
    assert out.count("round 2 against ") == 2
    # a first analysis builds the cache, whichever tree ran last (here both trees are this
    # checkout, so their caches' keys agree: without dropping it, the other's first would
    # read the cache this tree's steady run left), and a steady one reads it
    blocks = _round_one_blocks(out)
    assert sorted(blocks) == [
        f"against {ROOT}, first",
        f"against {ROOT}, steady",
        "this tree, first",
        "this tree, steady",
    ]
    for label, body in blocks.items():
        cached = "per-trial results + config x task sums (cached)" in body
        assert cached == label.endswith("steady"), label
        assert ("store the per-trial cache" in body) == label.endswith("first"), label
    assert "medians over 2 rounds (first, steady: this tree / against):" in out
    assert "first" in out.splitlines()[-1] and "steady" in out.splitlines()[-1]


def test_perf_script_refuses_a_kept_warehouse_it_would_write_over(tmp_path: Path) -> None:
    """--keep into a directory that holds files (an earlier --keep's, say) and --warehouse
    where no run was kept: one line naming the option and the fix, exit 2, before anything is
    generated, and the directory's files untouched."""
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("earlier results\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, option in (
        (["--keep", str(kept)], f"--keep {kept}"),
        (["--warehouse", str(empty)], f"--warehouse {empty}"),
    ):
        done = _analysis_process(*args)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""  # (nothing generated: that line would come first)
        [line] = done.stderr.splitlines()
        assert line.startswith(f"perf/analysis.py: {option}: ") and "Traceback" not in line
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]
    assert (kept / "notes.txt").read_text() == "earlier results\n"
    assert list(empty.iterdir()) == []


def _round_one_blocks(out: str) -> dict[str, str]:
    """perf/analysis.py --against's round-1 detail blocks: label -> the lines it printed."""
    blocks: dict[str, str] = {}
    label = None
    for line in out.splitlines():
        if line.endswith(", round 1:"):
            label = line[: -len(", round 1:")].rsplit(" (", 1)[0]
            blocks[label] = ""
        elif line.startswith(("round ", "medians over")):
            label = None
        elif label is not None:
            blocks[label] += line + "\n"
    return blocks


def test_a_truncated_file_is_named_not_a_traceback(tmp_path: Path) -> None:
    from bench_pipeline.warehouse.store import CorruptFileError

    run_id = "perf-20250101T000000-0000"
    trials, scores = PERF.generate(3, 2, 2, run_id=run_id)
    PERF.write_warehouse(tmp_path, trials, scores, "partition")
    wh = Warehouse(tmp_path)
    victim = wh.files("scores", run_id)[1]
    victim.write_bytes(victim.read_bytes()[:40])
    with pytest.raises(CorruptFileError) as err:
        compute_derived(wh, run_id)
    assert str(victim) in str(err.value) and "move it aside" in str(err.value)


# --------------------------------------------------------------------------- the per-trial cache

CACHED = "per-trial results + config x task sums (cached)"
RUN, BASE = "perf-20250102T000000-0001", "perf-20250101T000000-0000"


def _equal_to_previous(wh: Warehouse, derived, base_id: str | None = BASE) -> None:
    old, old_recs = reference.derived_tables(
        wh, RUN, base_id, {"overall": 0.05, "cost": 0.25}, suite="perf"
    )
    for name in DERIVED_TABLES:
        assert_same_table(name, derived.tables[name], old[name])
    assert derived.recommendations == old_recs


def _rescore(wh: Warehouse, config: str, rep: int, value: float) -> None:
    """A rescore of one partition's `checks`: a newer row per trial, written as a rescore
    writes it (a new file beside the partition's earlier scores)."""
    from bench_pipeline.warehouse import layout

    trials = wh.read("trials", RUN)
    mine = trials[(trials["config_id"] == config) & (trials["repetition"] == rep)]
    rows = [
        {
            "run_id": RUN,
            "trial_id": t.trial_id,
            "task_id": t.task_id,
            "config_id": config,
            "repetition": rep,
            "scorer": "checks",
            "scorer_group": "checks",
            "weight": 1.0,
            "status": "scored",
            "value": value,
            "rescore_id": "rescore-9",
            "scored_at": pd.Timestamp("2025-02-01", tz="UTC"),
        }
        for t in mine.drop_duplicates("trial_id").itertuples()
    ]
    wh.write("scores", rows, RUN, layout.score_part(config, rep, "rescore-9"))


@pytest.mark.parametrize("layout_name", ["run", "partition"])
def test_the_cached_route_equals_the_previous_one_fresh_cached_and_after_a_rescore(
    tmp_path: Path, layout_name: str
) -> None:
    from bench_pipeline.warehouse import layout

    _warehouse(tmp_path, layout_name, seed=3, run_id=BASE, reps=4)
    wh = _warehouse(tmp_path, layout_name, seed=11, run_id=RUN, reps=4)
    cache = wh.root / layout.per_trial_cache(RUN)
    assert not cache.exists()

    fresh = compute_derived(wh, RUN, baseline_run_id=BASE)  # builds both runs' caches
    assert CACHED not in fresh.timings and STORE_BESIDE in fresh.timings
    assert cache.exists() and (wh.root / layout.per_trial_cache(BASE)).exists()
    _equal_to_previous(wh, fresh)

    cached = compute_derived(wh, RUN, baseline_run_id=BASE)
    assert CACHED in cached.timings and STORE_BESIDE not in cached.timings
    _equal_to_previous(wh, cached)

    # a rescore that fails every checks score of cfg-1's first repetition: new files, a new key
    before = cached.tables["config_table"].set_index("config_id")
    _rescore(wh, "cfg-1", 1, 0.0)
    rescored = compute_derived(wh, RUN, baseline_run_id=BASE)
    assert CACHED not in rescored.timings
    _equal_to_previous(wh, rescored)
    after = rescored.tables["config_table"].set_index("config_id")
    assert after.loc["cfg-1", "score_checks"] < before.loc["cfg-1", "score_checks"]
    assert after.loc["cfg-0", "score_checks"] == before.loc["cfg-0", "score_checks"]

    again = compute_derived(wh, RUN, baseline_run_id=BASE)
    assert CACHED in again.timings
    _equal_to_previous(wh, again)


def test_the_cached_per_trial_rows_are_the_computed_ones(tmp_path: Path) -> None:
    """Column for column, dtype for dtype (categories and their order, nullable booleans,
    Arrow strings and lists), with the scorer catalog and the config x task sums."""
    from bench_pipeline.runs.derived import per_trial_results

    wh = _warehouse(tmp_path, "partition", seed=11, run_id=RUN, reps=4)
    timings: dict[str, float] = {}
    fresh, fresh_cells = per_trial_results(wh, RUN, timings)
    assert CACHED not in timings
    cached, cached_cells = per_trial_results(wh, RUN, timings)
    assert CACHED in timings
    pd.testing.assert_frame_equal(cached, fresh, check_exact=True)
    assert cached.attrs["scorer_catalog"] == fresh.attrs["scorer_catalog"]
    assert cached_cells.first.tolist() == fresh_cells.first.tolist()
    assert cached_cells.n_groups == fresh_cells.n_groups
    assert set(cached_cells.cells) == set(fresh_cells.cells)
    for name, values in fresh_cells.cells.items():
        got = cached_cells.cells[name]
        assert got.dtype == values.dtype, name
        if values.dtype == object:
            assert got.tolist() == values.tolist(), name
        else:
            np.testing.assert_array_equal(got, values, err_msg=name)  # (NaN equals NaN)


def test_the_per_trial_ids_and_tags_are_stored_in_the_cache_uncopied(tmp_path: Path) -> None:
    """Trials read from many files come back with their ids and tags as one array each, so the
    per-trial cache's record batch (one array per column) holds the frame's own buffers; a
    copy of every id would land on the analysis's peak."""
    import pyarrow as pa

    from bench_pipeline.runs.derived import _arrow_column, derived_per_trial

    trials, scores = PERF.generate(7, 3, 4, seed=11, run_id=RUN)  # (no resumed trial)
    PERF.write_warehouse(tmp_path, trials, scores, "partition")
    wh = Warehouse(tmp_path)
    assert len(wh.files("trials", RUN)) > 1
    per_trial = derived_per_trial(wh, RUN)
    schema = pa.Schema.from_pandas(per_trial.iloc[:0], preserve_index=False)  # (the cache's)
    for name in ("trial_id", "tags"):
        own = per_trial[name].array.__arrow_array__()
        assert own.num_chunks == 1, name
        stored = _arrow_column(per_trial[name], schema.field(name).type)
        owned = [b.address for b in own.chunk(0).buffers() if b is not None]
        assert [b.address for b in stored.buffers() if b is not None] == owned, name


def test_the_cache_is_written_beside_the_analysis_not_before_it(tmp_path: Path) -> None:
    """With a writer thread, per_trial_results hands back the rows while the cache's file is
    still to be written (the writer held busy here), and the file that lands is the rows."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from bench_pipeline.runs.derived import per_trial_results
    from bench_pipeline.warehouse import layout

    wh = _warehouse(tmp_path, "partition", seed=11, run_id=RUN, reps=4)
    cache = wh.root / layout.per_trial_cache(RUN)
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as writer:
        writer.submit(release.wait)  # the writer's one thread is busy until released
        timings: dict[str, float] = {}
        fresh, _ = per_trial_results(wh, RUN, timings, writer=writer)
        assert not cache.exists() and STORE_BESIDE not in timings
        release.set()
    assert cache.exists() and STORE_BESIDE in timings
    cached, _ = per_trial_results(wh, RUN, timings)
    assert CACHED in timings
    pd.testing.assert_frame_equal(cached, fresh, check_exact=True)


def _stale_by_replacing_a_score_file(wh: Warehouse) -> None:
    """One partition's scores rewritten (as `Warehouse.drop_rows` does: a new file renamed
    over the old one) with other values, its modification time put back as it was."""
    import os

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    victim = next(f for f in wh.files("scores", RUN) if f.name == "initial.parquet")
    st = victim.stat()
    table = pq.read_table(victim)
    flipped = pc.subtract(pa.scalar(1.0), table["value"])
    table = table.set_column(table.schema.get_field_index("value"), "value", flipped)
    tmp = victim.with_name(".tmp.parquet")
    pq.write_table(table, tmp)
    os.replace(tmp, victim)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_listing_the_cache_is_keyed_by_finds_what_glob_finds(tmp_path: Path) -> None:
    """`Warehouse.files` and `listed` walk the folders with os.scandir (Path.glob and a stat
    per file cost seconds at tens of thousands of files): the same files in the same order as
    `sorted(folder.glob("**/*.parquet"))`, a folder named like a file, temp files and folders
    reached by a symlink left out, and each file's own stat beside it."""
    import os

    wh = Warehouse(tmp_path / "wh")
    folder = wh.folder("scores", RUN)
    names = [
        "a/rep1/x.parquet",
        "a/rep10/x.parquet",
        "a/rep2/_batches/b.parquet",
        "a-b/rep1/x.parquet",  # ("-" sorts before "/" as text, after it as path parts)
        "a.b/rep1/x.parquet",
        "A/rep1/x.parquet",
        "top.parquet",
        "a/rep1/.x.parquet.0f3a.tmp",  # (a write in progress: `replacing`'s temp name)
        "a/rep1/notes.txt",
    ]
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(name.encode())
    (folder / "a" / "dir.parquet").mkdir()
    os.symlink(folder / "a", folder / "linked")
    expected = [p for p in sorted(folder.glob("**/*.parquet")) if p.is_file()]
    assert "linked" not in {p.relative_to(folder).parts[0] for p in expected}
    assert wh.files("scores", RUN) == expected
    listed = wh.listed("scores", RUN)
    assert [Path(path) for path, _ in listed] == expected
    for path, st in listed:
        assert (st.st_ino, st.st_size) == (os.stat(path).st_ino, os.stat(path).st_size)
    assert wh.files("scores", RUN, "a/rep1") == [folder / "a/rep1/x.parquet"]
    assert wh.files("scores", "no-such-run") == [] and wh.listed("trials", RUN) == []


def _stale_by_removing_a_trial_file(wh: Warehouse) -> None:
    wh.files("trials", RUN)[0].unlink()


def _stale_by_another_runs_cache(wh: Warehouse) -> None:
    """Another run's cache (built from other files) copied over this run's."""
    import shutil

    from bench_pipeline.warehouse import layout

    other = _warehouse(wh.root.parent / "other", "partition", seed=5, run_id=RUN, reps=4)
    compute_derived(other, RUN)
    shutil.copy(other.root / layout.per_trial_cache(RUN), wh.root / layout.per_trial_cache(RUN))


def _stale_by_a_truncated_cache(wh: Warehouse) -> None:
    from bench_pipeline.warehouse import layout

    cache = wh.root / layout.per_trial_cache(RUN)
    cache.write_bytes(cache.read_bytes()[:1000])


def _stale_by_unreadable_sums(wh: Warehouse) -> None:
    """The cache's key still current, its stored config x task sums cut inside their header."""
    _replace_sums(wh, lambda sums: sums[: sums.index(b"\0") // 2])


def _stale_by_short_sums(wh: Warehouse) -> None:
    """The cache's key still current, its stored config x task sums short of their last bytes."""
    _replace_sums(wh, lambda sums: sums[:-8])


def _replace_sums(wh: Warehouse, cut: Callable[[bytes], bytes]) -> None:
    from bench_pipeline.warehouse import layout

    sums = wh.root / layout.per_trial_cells(RUN)
    key, _, data = sums.read_bytes().partition(b"\n")
    sums.write_bytes(key + b"\n" + cut(data))


def _stale_by_missing_sums(wh: Warehouse) -> None:
    """The cache's key still current, the file of its config x task sums gone."""
    from bench_pipeline.warehouse import layout

    (wh.root / layout.per_trial_cells(RUN)).unlink()


def _stale_by_another_runs_sums(wh: Warehouse) -> None:
    """The cache's key still current, its sums' file another run's (built from other files)."""
    import shutil

    from bench_pipeline.warehouse import layout

    other = _warehouse(wh.root.parent / "other", "partition", seed=5, run_id=RUN, reps=4)
    compute_derived(other, RUN)
    shutil.copy(other.root / layout.per_trial_cells(RUN), wh.root / layout.per_trial_cells(RUN))


@pytest.mark.parametrize(
    "make_stale",
    [
        _stale_by_replacing_a_score_file,
        _stale_by_removing_a_trial_file,
        _stale_by_another_runs_cache,
        _stale_by_a_truncated_cache,
        _stale_by_unreadable_sums,
        _stale_by_short_sums,
        _stale_by_missing_sums,
        _stale_by_another_runs_sums,
    ],
)
def test_a_stale_cache_is_never_used(tmp_path: Path, make_stale) -> None:
    wh = _warehouse(tmp_path / "wh", "partition", seed=11, run_id=RUN, reps=4)
    first = compute_derived(wh, RUN)
    assert CACHED not in first.timings
    assert CACHED in compute_derived(wh, RUN).timings  # (the cache is used when current)
    make_stale(wh)
    rebuilt = compute_derived(wh, RUN)
    assert CACHED not in rebuilt.timings
    _equal_to_previous(wh, rebuilt, base_id=None)
    assert CACHED in compute_derived(wh, RUN).timings  # rebuilt for the files as they are now


def test_a_cache_that_cannot_be_written_leaves_the_analysis_as_it_was(tmp_path: Path) -> None:
    """The cache's folder taken by a file (as a read-only or full disk would refuse it): each
    analysis reads the files, gives the previous route's tables, and says nothing is cached."""
    from bench_pipeline.warehouse import layout

    wh = _warehouse(tmp_path, "run", seed=11, run_id=RUN, reps=4)
    blocker = (wh.root / layout.per_trial_cache(RUN)).parent
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")
    for _ in range(2):
        derived = compute_derived(wh, RUN)
        assert CACHED not in derived.timings
        _equal_to_previous(wh, derived, base_id=None)
    assert blocker.read_text() == "not a folder"


def test_more_scorer_groups_than_a_code_holds_take_the_general_route() -> None:
    """The latest cells keep a scorer's group as an int8 code: a batch with more groups than
    that holds is refused (the caller then takes the general route), never wrapped around."""
    import pyarrow as pa

    from bench_pipeline.results.scores import LatestCells

    def batch(groups: list[str]) -> pa.RecordBatch:
        n = len(groups)
        text = pa.dictionary(pa.int32(), pa.string())
        return pa.RecordBatch.from_pydict(
            {
                "run_id": pa.array(["run"] * n).cast(text),
                "scorer": pa.array([f"s{i}" for i in range(n)]).cast(text),
                "scorer_group": pa.array(groups).cast(text),
                "weight": pa.array([1.0] * n),
                "status": pa.array(["scored"] * n).cast(text),
                "value": pa.array([1.0] * n),
                "cost_usd": pa.array([None] * n, pa.float64()),
                "scored_at": pa.array([1] * n, pa.timestamp("us", tz="UTC")),
            }
        )

    rows = np.zeros(200, dtype=np.int32)
    cells = LatestCells(1, "run", 200)
    assert cells.add(batch([f"g{i}" for i in range(127)]), rows[:127])
    assert not cells.add(batch([f"h{i}" for i in range(5)]), rows[:5])  # 132 groups in all
    assert LatestCells(1, "run", 200).add(batch([f"g{i}" for i in range(200)]), rows) is False
