"""CI results as a scorer: push each trial's final state to a `bench/**` branch, then read
the GitHub checks API for that commit (`ci.github`, polled by a Dagster sensor, `ci.status`)."""
