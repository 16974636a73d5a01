"""Agents that call no model: the oracle, the recorded baseline, and doing nothing.

They make the whole pipeline runnable offline and give every benchmark its reference points:
`reference` is the ceiling the checks allow, `noop` the floor, `replay` what the team's
original run really produced (with its recorded tokens and cost).
"""

from __future__ import annotations

from bench_pipeline.agents.base import (
    COMPLETED,
    Agent,
    AgentRequest,
    AgentResult,
    TaskFault,
    Usage,
    register_agent,
)
from bench_pipeline.formats.model import Task
from bench_pipeline.workspace.repo import WorkspaceError, apply_patch


class NotApplicable(Exception):
    """The agent cannot run this task at all (replay of a task with no recorded original)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason  # short and task-independent: cost-unknown reasons are counted


class OfflineAgent(Agent):
    """No model, no spend, and an answer that cannot change with feedback: one attempt."""

    offline = True
    takes_feedback = False


@register_agent
class ReferenceAgent(OfflineAgent):
    kind = "reference"
    control = True

    def run(self, request: AgentRequest) -> AgentResult:
        task = request.task
        if request.workspace is None:
            return AgentResult(
                COMPLETED, Usage.free(), answer=task.original.text if task.original else ""
            )
        if not task.reference_patch:
            raise TaskFault(f"task {task.id} has no reference patch")
        patch = (request.inputs_dir / task.reference_patch).read_text()
        try:
            apply_patch(request.workspace, patch)
        except WorkspaceError as exc:
            raise TaskFault(f"reference patch does not apply to the base: {exc}") from None
        request.transcript.write("reference_patch_applied", file=task.reference_patch)
        return AgentResult(COMPLETED, Usage.free())


@register_agent
class ReplayAgent(OfflineAgent):
    kind = "replay"

    def not_applicable(self, task: Task) -> tuple[str, str] | None:
        if task.original is None:
            return f"task {task.id} has no recorded original answer", "no recorded original answer"
        return None

    def run(self, request: AgentRequest) -> AgentResult:
        original = request.task.original
        if original is None:
            raise NotApplicable(*self.not_applicable(request.task))  # type: ignore[misc]
        usage = Usage(
            original.input_tokens,
            original.output_tokens,
            original.cache_read_tokens,
            original.cache_write_tokens,
            original.cost_usd,
            None if original.cost_usd is not None else "the recorded original has no cost",
        )
        if usage.cost_usd is None and original.input_tokens is not None:
            usage.cost_usd = request.prices.cost(
                original.model,
                original.input_tokens or 0,
                original.output_tokens or 0,
                original.cache_read_tokens or 0,
                original.cache_write_tokens or 0,
            )
            if usage.cost_usd is not None:
                usage.cost_unknown_reason = None
        request.transcript.write(
            "replay", model=original.model, has_patch=original.patch is not None
        )
        model = original.model
        if request.workspace is None:
            return AgentResult(COMPLETED, usage, answer=original.text or "", model=model)
        if original.patch:
            try:
                apply_patch(request.workspace, original.patch)
            except WorkspaceError as exc:
                raise TaskFault(
                    f"recorded original patch does not apply to the base: {exc}"
                ) from None
        return AgentResult(COMPLETED, usage, model=model)


@register_agent
class NoopAgent(OfflineAgent):
    kind = "noop"
    control = True

    def run(self, request: AgentRequest) -> AgentResult:
        return AgentResult(
            COMPLETED, Usage.free(), answer="" if request.workspace is None else None
        )
