"""Hand-built evidence for the scorer tests (no loader, no trial runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_pipeline.formats.model import (
    AgentSpec,
    Assertion,
    Check,
    Config,
    Judge,
    Prices,
    Task,
    Turn,
)
from bench_pipeline.scorers.base import ScorerContext, TrialEvidence

JUDGE_MODEL = "claude-judge-test"
PRICES = Prices(
    {JUDGE_MODEL: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}
)


def code_task(**kw: Any) -> Task:
    defaults: dict[str, Any] = dict(
        id="tenant-isolation",
        suite="invoices",
        title="Tenant isolation",
        prompt="Admins must only read invoices of their own tenant.",
        repo="/tmp/repo",
        base_ref="v1.0",
        base_sha="abc123",
        criteria=(
            "an admin cannot read invoices of another tenant",
            "support can still read every tenant",
            "owners read their own tenant",
        ),
        checks=(
            Check("AC-1", "admins confined to their tenant", ("python", "g1.py"), ("g1.py",)),
            Check("AC-2", "support reads all", ("python", "g2.py"), ("g2.py",)),
        ),
    )
    defaults.update(kw)
    return Task(**defaults)


def text_task(asserts: tuple[Assertion, ...] = (), turns: tuple[Turn, ...] = (), **kw: Any) -> Task:
    defaults: dict[str, Any] = dict(
        id="faq",
        suite="support",
        title="FAQ answer",
        prompt="How do I void an invoice?",
        repo=None,
        base_ref=None,
        base_sha=None,
        asserts=asserts,
        turns=turns,
    )
    defaults.update(kw)
    return Task(**defaults)


def config(model: str = "claude-sonnet-4-5", cid: str = "sonnet") -> Config:
    return Config(cid, AgentSpec(name="coder", kind="anthropic", model=model, max_iterations=3))


def trial(task: Task, tmp: Path, **kw: Any) -> TrialEvidence:
    defaults: dict[str, Any] = dict(
        run_id="run-1",
        trial_id=f"{task.id}/sonnet/1",
        task=task,
        config=config(),
        repetition=1,
        outcome="succeeded",
        error=None,
        evidence_dir=tmp,
    )
    defaults.update(kw)
    return TrialEvidence(**defaults)


def context(
    tmp: Path,
    judge: Judge | None = None,
    config_models: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
) -> ScorerContext:
    return ScorerContext(
        judge=judge,
        prices=PRICES,
        factory_root=tmp,
        config_models=config_models,
        environ={"JUDGE_KEY": "sk-test"} if environ is None else environ,
    )
