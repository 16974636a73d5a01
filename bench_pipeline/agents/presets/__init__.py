"""Command-agent presets: each module registers a `CliContract` under its `preset:` name."""

from bench_pipeline.agents.presets import claude_code, codex  # noqa: F401  (registration)
