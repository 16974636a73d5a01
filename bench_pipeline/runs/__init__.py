"""The use cases: start, estimate, execute, score, rescore, derive, compare, status and cancel.
The only API that `defs/` (Dagster) and `cli/` (bench) call."""
