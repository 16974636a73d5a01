"""The `bench` command line."""

from bench_pipeline.cli.main import main

__all__ = ["main"]
