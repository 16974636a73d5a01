"""Trials and scores are partitioned by suite-scoped configuration (dynamic: added when a run
starts) x repetition (static 1..10, the launch limit).

A config key is `<suite>:<config>` (`invoices:reference`). Why: two suites may use the same
config id for different work, and one shared key would mix their trials' materializations, let
a backfill of one suite "complete" partitions of another and make the latest materialization
of a key belong to whichever suite ran last. With the suite in the key, a partition belongs to
one suite: its runs, its history and its status in the UI are that suite's alone, and a step
launched from the UI without a run id resolves the latest run OF THAT SUITE. `:` cannot occur in
a suite or config id (`formats.model.ID_PATTERN`), so the key splits unambiguously.
"""

import dagster as dg

from bench_pipeline.formats.model import MAX_REPETITIONS

CONFIG_PARTITIONS_NAME = "bench_config"
SEPARATOR = ":"
config_partitions = dg.DynamicPartitionsDefinition(name=CONFIG_PARTITIONS_NAME)
rep_partitions = dg.StaticPartitionsDefinition([str(i) for i in range(1, MAX_REPETITIONS + 1)])
trial_partitions = dg.MultiPartitionsDefinition(
    {"config": config_partitions, "rep": rep_partitions}
)


def config_key(suite: str, config_id: str) -> str:
    """The config dimension's key of one suite's configuration."""
    return f"{suite}{SEPARATOR}{config_id}"


def split_config_key(key: str) -> tuple[str | None, str]:
    """(suite, config id) of a config key; suite None for a key made before keys had suites."""
    suite, sep, config_id = key.partition(SEPARATOR)
    return (suite, config_id) if sep else (None, key)


def partition_key(suite: str, config_id: str, rep: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"config": config_key(suite, config_id), "rep": str(rep)})


def register_configs(instance: dg.DagsterInstance, suite: str, config_ids: list[str]) -> None:
    """Add the suite's config keys the instance does not know yet.

    Two `bench run`s of one suite may start at once: both read the keys, both see one missing,
    and the second insert hits the storage's unique constraint. Losing that race is success
    (the key exists), so each key is added on its own and a failed add is accepted when a
    fresh read shows the key there; any other failure is raised.
    """
    known = set(instance.get_dynamic_partitions(CONFIG_PARTITIONS_NAME))
    for key in (config_key(suite, c) for c in config_ids):
        if key in known:
            continue
        try:
            instance.add_dynamic_partitions(CONFIG_PARTITIONS_NAME, [key])
        except Exception:
            if not instance.has_dynamic_partition(CONFIG_PARTITIONS_NAME, key):
                raise
