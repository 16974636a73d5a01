"""Operations around runs: the nightly driver, regression notifications, and the GitHub CI
client and poller. No Dagster here: `defs/operations` wires these into sensors and schedules."""
