"""`assert`: deterministic text assertions on every turn of a text or scenario task.

A single-prompt task's answer is one turn graded with `task.asserts`; a scenario task grades
`trial.turns[i]` with `task.turns[i].asserts`. Turn records are
`{user, response, latency_ms, completion_tokens, cost_usd}`.

Each assertion evaluates to passed / failed / unknown. *Unknown* happens only for the metric
assertions (`max_elapsed_ms`, `max_completion_tokens`, `max_cost_usd`) when the turn did not
record that metric: unknown is never zero, so it cannot pass. A turn passes when every
assertion passed; the trial scores 1 when every turn passed, 0 when any assertion failed, and is
inconclusive when nothing failed but something was unknown.

Assertion values (SPEC §2):

| type | value | holds when |
|---|---|---|
| contains / not_contains | string or list of strings | each string is (not) a substring (case-sensitive, like promptfoo) |
| regex | pattern string | `re.search` finds it (Python syntax) |
| min_links | int | markdown `[t](u)`, `<a href>` and `<http…>` autolinks >= value |
| min_urls | int | distinct http(s) URLs anywhere in the text >= value |
| valid_urls | true (false disables) | every URL-like token and link target is a syntactically valid absolute http(s) URL (no network); `#anchor` and `mailto:` targets are skipped; vacuously true with no URLs |
| min_chars | int | len(stripped response) >= value |
| max_elapsed_ms | number | turn latency_ms <= value |
| max_completion_tokens | int | turn completion_tokens <= value |
| max_cost_usd | number | turn cost_usd <= value |
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from bench_pipeline.formats.errors import BenchInputError, closest
from bench_pipeline.formats.model import ASSERT_TYPES, Assertion
from bench_pipeline.formats.vocabulary import SCORE_ERROR, SCORE_INCONCLUSIVE, SCORE_NOT_SCORED
from bench_pipeline.scorers.base import Scorer, ScoreResult, TrialEvidence, register_scorer
from bench_pipeline.scorers.outcome import outcome_gate

PASSED, FAILED, UNKNOWN = "passed", "failed", "unknown"

_MD_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HTML_LINK = re.compile(r"<a\s[^>]*?href\s*=\s*([\"'])(.*?)\1", re.IGNORECASE | re.DOTALL)
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^>\s]+)>", re.IGNORECASE)
_URL_TOKEN = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"'`\]]+", re.IGNORECASE)
_HTTP_TOKEN = re.compile(r"\bhttps?://[^\s<>\"'`\]]+", re.IGNORECASE)
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$", re.IGNORECASE)
_TRAILING = ".,;:!?'\"*_"


# --------------------------------------------------------------------------- text helpers


def _trim_url(url: str) -> str:
    """Drop sentence punctuation and unbalanced closing parens glued to a bare URL."""
    while url:
        if url[-1] in _TRAILING:
            url = url[:-1]
        elif url[-1] == ")" and url.count("(") < url.count(")"):
            url = url[:-1]
        else:
            break
    return url


def find_links(text: str) -> list[str]:
    """Targets of markdown links, HTML anchors and <autolinks>, in order of appearance."""
    found: list[tuple[int, str]] = []
    found += [(m.start(), m.group(1)) for m in _MD_LINK.finditer(text)]
    found += [(m.start(), m.group(2).strip()) for m in _HTML_LINK.finditer(text)]
    found += [(m.start(), m.group(1)) for m in _AUTOLINK.finditer(text)]
    return [target for _, target in sorted(found)]


def find_urls(text: str) -> list[str]:
    """Distinct http(s) URLs anywhere in the text (bare or inside links), first-seen order."""
    urls = [_trim_url(m.group(0)) for m in _HTTP_TOKEN.finditer(text)]
    return list(dict.fromkeys(u for u in urls if u))


def is_valid_http_url(url: str) -> bool:
    """Syntactic check only (no network): absolute http(s), a plausible host, a valid port."""
    if any(ch.isspace() for ch in url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError when out of range / not numeric
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return False
    host = parts.hostname or ""
    if not host:
        return False
    if port is not None and not 0 < port < 65536:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    if host == "localhost":
        return True
    labels = host.rstrip(".").split(".")
    if len(labels) < 2 or not all(_HOST_LABEL.match(label) for label in labels):
        return False
    return not labels[-1].isdigit()


def url_candidates(text: str) -> list[str]:
    """Everything that claims to be a URL: link targets (minus anchors/mailto) and
    scheme://… tokens."""
    candidates = [
        t for t in find_links(text) if t and not t.startswith("#") and not t.startswith("mailto:")
    ]
    candidates += [_trim_url(m.group(0)) for m in _URL_TOKEN.finditer(text)]
    return list(dict.fromkeys(c for c in candidates if c))


# --------------------------------------------------------------------------- assertions


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError("needs a string or a non-empty list of strings")


def _number(value: Any, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("needs a number")
    if integer and int(value) != value:
        raise ValueError("needs a whole number")
    if value < 0:
        raise ValueError("must not be negative")
    return value


def validate_assertion(assertion: Assertion, where: str | None = None) -> None:
    """Raise BenchInputError for an unknown type or a value the type cannot use."""
    key = f"assert.{assertion.type}"
    if assertion.type not in ASSERT_TYPES:
        raise BenchInputError(
            where, key, f"unknown assert type; {closest(assertion.type, ASSERT_TYPES)}"
        )
    try:
        _check_value(assertion)
    except ValueError as exc:
        raise BenchInputError(where, key, str(exc)) from None


def _check_value(a: Assertion) -> None:
    if a.type in ("contains", "not_contains"):
        _strings(a.value)
    elif a.type == "regex":
        if not isinstance(a.value, str):
            raise ValueError("needs a pattern string")
        try:
            re.compile(a.value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
    elif a.type == "valid_urls":
        if not isinstance(a.value, bool):
            raise ValueError("needs true or false")
    elif a.type in ("min_links", "min_urls", "min_chars", "max_completion_tokens"):
        _number(a.value, integer=True)
    else:
        _number(a.value)


def _metric(turn: dict[str, Any], key: str, limit: float, unit: str) -> dict[str, Any]:
    actual = turn.get(key)
    if actual is None:
        return {"status": UNKNOWN, "actual": None, "reason": f"turn has no {key} recorded"}
    ok = actual <= limit
    return {
        "status": PASSED if ok else FAILED,
        "actual": actual,
        "reason": f"{key} {actual}{unit} {'<=' if ok else '>'} {limit}{unit}",
    }


def evaluate_assertion(assertion: Assertion, turn: dict[str, Any]) -> dict[str, Any]:
    """One assertion against one turn record: {type, value, status, actual, reason}."""
    kind, value = assertion.type, assertion.value
    out: dict[str, Any] = {"type": kind, "value": value}
    text = turn.get("response") or ""
    try:
        if kind not in ASSERT_TYPES:
            raise ValueError(f"unknown assert type {kind!r}")
        _check_value(assertion)
    except ValueError as exc:
        return {**out, "status": "error", "actual": None, "reason": str(exc)}

    if kind in ("contains", "not_contains"):
        present = [s for s in _strings(value) if s in text]
        absent = [s for s in _strings(value) if s not in text]
        if kind == "contains":
            ok, reason = not absent, f"missing {absent!r}" if absent else "all present"
        else:
            ok, reason = not present, f"found {present!r}" if present else "none present"
        res = {"status": PASSED if ok else FAILED, "actual": None, "reason": reason}
    elif kind == "regex":
        m = re.search(value, text)
        res = {
            "status": PASSED if m else FAILED,
            "actual": m.group(0)[:200] if m else None,
            "reason": "matched" if m else f"no match for /{value}/",
        }
    elif kind == "min_links":
        n = len(find_links(text))
        res = {"status": PASSED if n >= value else FAILED, "actual": n, "reason": f"{n} links"}
    elif kind == "min_urls":
        n = len(find_urls(text))
        res = {"status": PASSED if n >= value else FAILED, "actual": n, "reason": f"{n} URLs"}
    elif kind == "valid_urls":
        if value is False:
            res = {"status": PASSED, "actual": None, "reason": "disabled"}
        else:
            bad = [u for u in url_candidates(text) if not is_valid_http_url(u)]
            res = {
                "status": FAILED if bad else PASSED,
                "actual": bad[:20],
                "reason": f"invalid URLs: {bad[:5]!r}" if bad else "all URLs valid",
            }
    elif kind == "min_chars":
        n = len(text.strip())
        res = {"status": PASSED if n >= value else FAILED, "actual": n, "reason": f"{n} chars"}
    elif kind == "max_elapsed_ms":
        res = _metric(turn, "latency_ms", value, " ms")
    elif kind == "max_completion_tokens":
        res = _metric(turn, "completion_tokens", value, "")
    else:  # max_cost_usd
        res = _metric(turn, "cost_usd", value, " USD")
    return {**out, **res}


def evaluate_turn(asserts: Iterable[Assertion], turn: dict[str, Any] | None) -> dict[str, Any]:
    """All assertions of one turn. status: passed | failed | unknown | error."""
    if turn is None:
        return {"status": FAILED, "asserts": [], "reason": "no response recorded for this turn"}
    results = [evaluate_assertion(a, turn) for a in asserts]
    statuses = {r["status"] for r in results}
    for status in ("error", FAILED, UNKNOWN):
        if status in statuses:
            bad = [r for r in results if r["status"] == status]
            reason = "; ".join(f"{r['type']}: {r['reason']}" for r in bad)
            return {"status": status, "asserts": results, "reason": reason}
    return {"status": PASSED, "asserts": results, "reason": f"{len(results)} assertions held"}


def graded_turns(trial: TrialEvidence) -> list[tuple[tuple[Assertion, ...], dict[str, Any] | None]]:
    """Pairs (assertions, recorded turn) to grade, scenario or single prompt."""
    task = trial.task
    if task.turns:
        recorded = list(trial.turns)
        return [
            (t.asserts, recorded[i] if i < len(recorded) else None)
            for i, t in enumerate(task.turns)
        ]
    if trial.turns:
        turn = dict(trial.turns[-1])
    elif trial.answer is not None:
        latency = trial.duration_seconds * 1000 if trial.duration_seconds is not None else None
        turn = {
            "user": task.prompt,
            "response": trial.answer,
            "latency_ms": latency,
            "completion_tokens": trial.metadata.get("output_tokens"),
            "cost_usd": trial.cost_usd,
        }
    else:
        turn = None
    return [(task.asserts, turn)]


@register_scorer
class AssertScorer(Scorer):
    name = "assert"

    def score(self, trial: TrialEvidence) -> list[ScoreResult]:
        task = trial.task
        if not task.asserts and not any(t.asserts for t in task.turns):
            return [ScoreResult(self.name, SCORE_NOT_SCORED, reason="task defines no assertions")]
        gate = outcome_gate(trial)
        if gate is not None:
            return [gate.result(self.name)]
        turns = []
        for i, (asserts, turn) in enumerate(graded_turns(trial), start=1):
            verdict = evaluate_turn(asserts, turn)
            turn = turn or {}
            turns.append(
                {
                    "turn": i,
                    "user": turn.get("user"),
                    "status": verdict["status"],
                    "passed": verdict["status"] == PASSED,
                    "reason": verdict["reason"],
                    "asserts": verdict["asserts"],
                    "latency_ms": turn.get("latency_ms"),
                    "completion_tokens": turn.get("completion_tokens"),
                    "cost_usd": turn.get("cost_usd"),
                }
            )
        details = {"turns": turns}
        by_status = {
            s: [t["turn"] for t in turns if t["status"] == s] for s in ("error", FAILED, UNKNOWN)
        }
        if by_status["error"]:
            why = "; ".join(
                f"turn {t['turn']}: {t['reason']}" for t in turns if t["status"] == "error"
            )
            return [
                ScoreResult(self.name, SCORE_ERROR, reason=f"bad assertion: {why}", details=details)
            ]
        if by_status[FAILED]:
            why = "; ".join(
                f"turn {t['turn']}: {t['reason']}" for t in turns if t["status"] == FAILED
            )
            reason = f"{len(by_status[FAILED])}/{len(turns)} turns failed: {why}"
            return [ScoreResult.scored(self.name, 0.0, reason=reason, details=details)]
        if by_status[UNKNOWN]:
            why = "; ".join(
                f"turn {t['turn']}: {t['reason']}" for t in turns if t["status"] == UNKNOWN
            )
            return [
                ScoreResult(
                    self.name, SCORE_INCONCLUSIVE, reason=f"unknown metric: {why}", details=details
                )
            ]
        n_asserts = sum(len(t["asserts"]) for t in turns)
        reason = f"all {n_asserts} assertions held over {len(turns)} turn(s)"
        return [ScoreResult.scored(self.name, 1.0, reason=reason, details=details)]


# --------------------------------------------------------------------------- pass^N


def turn_rows(trial: TrialEvidence, result: ScoreResult) -> list[dict[str, Any]]:
    """Per-turn rows of one graded trial, the input of :func:`turn_pass_hat_n`."""
    return [
        {
            "task_id": trial.task.id,
            "config_id": trial.config.id,
            "repetition": trial.repetition,
            "turn": t["turn"],
            "passed": t["passed"],
            "latency_ms": t.get("latency_ms"),
            "completion_tokens": t.get("completion_tokens"),
            "cost_usd": t.get("cost_usd"),
            "judge_score": t.get("judge_score"),
        }
        for t in result.details.get("turns", [])
    ]


def _mean(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return sum(known) / len(known) if known else None


def turn_pass_hat_n(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cross-repetition rule: a (task, config, turn) passes only if it passed in EVERY
    repetition (pass^N). Rows: {task_id, config_id, repetition, turn, passed, latency_ms,
    completion_tokens, cost_usd, judge_score}; metrics are averaged over the repetitions that
    recorded them (None when none did, never 0). A repetition with `passed` None/False fails."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["task_id"], row["config_id"], row["turn"]), []).append(row)
    out = []
    for (task_id, config_id, turn), reps in sorted(groups.items()):
        passes = sum(1 for r in reps if r.get("passed") is True)
        out.append(
            {
                "task_id": task_id,
                "config_id": config_id,
                "turn": turn,
                "repetitions": len(reps),
                "passes": passes,
                "passed": passes == len(reps),
                "pass_rate": passes / len(reps),
                "failed_repetitions": sorted(
                    r.get("repetition") for r in reps if r.get("passed") is not True
                ),
                "latency_ms": _mean([r.get("latency_ms") for r in reps]),
                "completion_tokens": _mean([r.get("completion_tokens") for r in reps]),
                "cost_usd": _mean([r.get("cost_usd") for r in reps]),
                "judge_score": _mean([r.get("judge_score") for r in reps]),
            }
        )
    return out
