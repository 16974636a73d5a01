"""Trials and scores are partitioned by configuration (dynamic: added when a run starts) x
repetition (static 1..10, the launch limit)."""

import dagster as dg

from bench_pipeline.formats.model import MAX_REPETITIONS

CONFIG_PARTITIONS_NAME = "bench_config"
config_partitions = dg.DynamicPartitionsDefinition(name=CONFIG_PARTITIONS_NAME)
rep_partitions = dg.StaticPartitionsDefinition([str(i) for i in range(1, MAX_REPETITIONS + 1)])
trial_partitions = dg.MultiPartitionsDefinition(
    {"config": config_partitions, "rep": rep_partitions}
)


def partition_key(config_id: str, rep: int) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"config": config_id, "rep": str(rep)})


def register_configs(instance: dg.DagsterInstance, config_ids: list[str]) -> None:
    known = set(instance.get_dynamic_partitions(CONFIG_PARTITIONS_NAME))
    new = [c for c in config_ids if c not in known]
    if new:
        instance.add_dynamic_partitions(CONFIG_PARTITIONS_NAME, new)
