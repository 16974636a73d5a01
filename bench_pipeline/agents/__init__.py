"""Agent kinds, registered by name. Importing this package registers every built-in kind."""

from bench_pipeline.agents import (  # noqa: F401  (each module registers its kind)
    anthropic_agent,
    command,
    http_chat,
    offline,
)
from bench_pipeline.agents.base import Agent, make_agent, register_agent

__all__ = ["Agent", "make_agent", "register_agent"]
