"""The outcome and score-status words every layer speaks: what a trial ended as, and what a
scorer could say about it. Stored in the warehouse tables and shown in every result."""

from __future__ import annotations

# Trial outcomes. Only `succeeded` means the agent finished within its limits; checks may still
# have failed. `invalidated`, `workspace_error` are infrastructure: they are excluded from paired
# comparisons and may be retried on resume. `not_applicable` is a replay trial of a task with no
# recorded original answer.
OUTCOME_SUCCEEDED = "succeeded"
OUTCOME_AGENT_ERROR = "agent_error"
OUTCOME_BUDGET = "budget_exceeded"  # cost above budget_usd, timeout, or max_turns
OUTCOME_INVALIDATED = "invalidated"  # a grader file or reference changed during the trial
OUTCOME_WORKSPACE_ERROR = "workspace_error"
OUTCOME_CANCELLED = "cancelled"
OUTCOME_NOT_APPLICABLE = "not_applicable"
OUTCOME_TASK_ERROR = "task_error"  # the task itself is broken, e.g. its reference does not apply
FAILED_OUTCOMES = frozenset({OUTCOME_AGENT_ERROR, OUTCOME_BUDGET})
INFRA_OUTCOMES = frozenset({OUTCOME_INVALIDATED, OUTCOME_WORKSPACE_ERROR, OUTCOME_TASK_ERROR})

# Score statuses. Only `scored` rows carry a value and count in means; the others keep a reason
# and show up in `scored/of`.
SCORE_SCORED = "scored"
SCORE_NOT_SCORED = "not_scored"  # the scorer cannot apply (text task for a diff scorer, ...)
SCORE_INCONCLUSIVE = "inconclusive"  # grader fault / judge abstained: never the agent's failure
SCORE_ERROR = "error"  # the scorer itself failed (unparseable judge answer, crash)
SCORE_MISSING = "missing"  # expected but not (yet) available, e.g. CI pending past ci_timeout

# The reserved tag of tasks without tags (a task may not use it as a tag).
UNTAGGED = "-"

# Isolation modes of agent and grader processes (recorded per trial). `sandbox`: bubblewrap,
# own PID/mount namespaces, only the workspace, a private home and tmp writable. `process`: the
# fallback where bubblewrap cannot run: own process group, scrubbed environment, and a marker
# the harness finds descendants by — weaker (see the README's "Isolation and integrity").
ISOLATION_SANDBOX = "sandbox"
ISOLATION_PROCESS = "process"
ISOLATION_MODES = (ISOLATION_SANDBOX, ISOLATION_PROCESS)
# Network of sandboxed processes: `none` (loopback of an empty network namespace) or `model`
# (the host's network, so an agent can reach its model API — and everything else the host can).
NETWORK_NONE = "none"
NETWORK_MODEL = "model"
NETWORK_MODES = (NETWORK_NONE, NETWORK_MODEL)
