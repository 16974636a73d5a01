"""Column contracts of the warehouse tables.

Every writer builds rows against these schemas and every reader (results, CLI, DuckDB views)
relies on them, so a column added here is the one place to look. Parquet files are written
with exactly these schemas; nullable columns mean "unknown", never zero.
"""

from __future__ import annotations

import pyarrow as pa

RUNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("suite", pa.string()),
        ("launch", pa.string()),  # launch name (file stem)
        ("task_set_revision", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("configs_json", pa.string()),  # frozen configs with their hashes
        ("scorers_json", pa.string()),
        ("judge_json", pa.string()),
        ("repetitions", pa.int32()),
        ("engine_version", pa.string()),
    ]
)

TRIALS = pa.schema(
    [
        ("run_id", pa.string()),
        ("suite", pa.string()),
        ("task_set_revision", pa.string()),
        ("trial_id", pa.string()),  # "<task>/<config>/<rep>" unique within a run
        ("task_id", pa.string()),
        ("config_id", pa.string()),
        ("repetition", pa.int32()),
        ("tags", pa.list_(pa.string())),  # empty list = untagged (shown as "-")
        ("holdout", pa.bool_()),
        ("difficulty", pa.string()),
        ("agent", pa.string()),
        ("agent_kind", pa.string()),
        ("model", pa.string()),
        ("effort", pa.string()),
        ("config_hash", pa.string()),
        ("factory_ref", pa.string()),
        ("factory_sha", pa.string()),
        ("is_baseline", pa.bool_()),  # the replay of recorded originals
        ("outcome", pa.string()),
        ("error", pa.string()),
        ("iterations", pa.int32()),
        ("input_tokens", pa.int64()),  # null when the agent reported no usage
        ("output_tokens", pa.int64()),
        ("cache_read_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("cost_usd", pa.float64()),  # null = unknown, never 0
        ("cost_unknown_reason", pa.string()),
        ("duration_seconds", pa.float64()),
        ("agent_seconds", pa.float64()),
        ("grading_seconds", pa.float64()),
        ("retries", pa.int32()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("evidence_dir", pa.string()),
        ("engine_version", pa.string()),
        ("attempt_no", pa.int32()),  # which execution of the benchmark run wrote it (resume)
        ("isolation", pa.string()),  # sandbox | process: how the agent and graders ran
        ("network", pa.string()),  # none | model
        ("evidence_truncated", pa.bool_()),  # a patch, log or transcript was cut at its cap
    ]
)

SCORES = pa.schema(
    [
        ("run_id", pa.string()),
        ("trial_id", pa.string()),
        ("task_id", pa.string()),
        ("config_id", pa.string()),
        ("repetition", pa.int32()),
        ("scorer", pa.string()),  # "checks", "llm_judge:correctness", "workflow:lint"
        ("scorer_group", pa.string()),  # "llm_judge" for every judge criterion; else = scorer
        ("weight", pa.float64()),  # share within the group; 0 = reported, not counted
        ("status", pa.string()),
        ("value", pa.float64()),  # in [0, 1]; null unless status == scored
        ("raw_value", pa.float64()),  # on the scorer's own scale
        ("scale_max", pa.float64()),
        ("reason", pa.string()),
        ("cost_usd", pa.float64()),  # scorer cost (judge tokens), never the config's cost
        ("details_json", pa.string()),
        ("rescore_id", pa.string()),  # "initial" or the rescore that produced the row
        ("scored_at", pa.timestamp("us", tz="UTC")),
    ]
)

TEST_RESULTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("trial_id", pa.string()),
        ("task_id", pa.string()),
        ("config_id", pa.string()),
        ("repetition", pa.int32()),
        ("attempt", pa.int32()),
        ("test_id", pa.string()),  # pytest node id, e.g. tests/test_x.py::TestY::test_z[1]
        ("list", pa.string()),  # fail_to_pass | pass_to_pass | flaky (run, never scored)
        ("outcome", pa.string()),  # passed | failed | error | skipped | missing
        ("duration_seconds", pa.float64()),
    ]
)

CHECK_RESULTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("trial_id", pa.string()),
        ("attempt", pa.int32()),
        ("check_id", pa.string()),
        ("status", pa.string()),  # passed | failed | inconclusive
        ("exit_code", pa.int32()),
        ("timed_out", pa.bool_()),
        ("duration_seconds", pa.float64()),
    ]
)
