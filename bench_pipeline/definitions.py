"""The code location's entry point for `workspace.yaml`, `dagster dev` and `[tool.dagster]`:
the definitions themselves are assembled in `bench_pipeline.defs.definitions`."""

from bench_pipeline.defs.definitions import defs

__all__ = ["defs"]
