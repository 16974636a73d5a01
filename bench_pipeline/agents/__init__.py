"""Agent kinds, registered by name. Importing this package registers every built-in kind."""

from bench_pipeline.agents import (  # noqa: F401  (each module registers its kind)
    anthropic_agent,
    command,
    http_chat,
    offline,
)
from bench_pipeline.agents.base import AGENT_KINDS, Agent, make_agent

__all__ = ["AGENT_KINDS", "Agent", "make_agent"]
