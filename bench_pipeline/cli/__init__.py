"""The `bench` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """The `bench` entry point: the command runs in a warm `bench serve` of its home when one
    runs (`cli.handoff`, standard library only), else here (`cli.main`)."""
    from bench_pipeline.cli.handoff import hand_off

    argv = sys.argv[1:] if argv is None else list(argv)
    served = hand_off(argv)
    if served is not None:
        return served
    from bench_pipeline.cli.main import main as run_here

    return run_here(argv)


__all__ = ["main"]
