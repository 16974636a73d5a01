"""The GitHub checks API, read with conditional requests and the rate limit honoured.

`GET {api_url}/repos/{owner}/{repo}/commits/{sha}/check-suites`:

- an ETag from an earlier answer is sent as `If-None-Match`; `304 Not Modified` means nothing
  changed (and does not count against the rate limit);
- `x-ratelimit-remaining: 0` means no request until `x-ratelimit-reset` (epoch seconds); a
  403/429 with that header is the same signal;
- the token (if any) is read from the environment variable the launch names (`ci.token_env`).

`verdict()` turns check suites into the `ci` score: success when every suite that ran
anything completed as success/neutral/skipped; failure as soon as one concluded failure,
timed_out, cancelled or action_required; otherwise pending (no score yet).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench_pipeline.scorers.ci import FAILURE, PENDING, SUCCESS

PASSING_CONCLUSIONS = frozenset({"success", "neutral", "skipped"})
FAILING_CONCLUSIONS = frozenset({"failure", "timed_out", "cancelled", "action_required"})
API_VERSION = "2022-11-28"


@dataclass
class ChecksReply:
    status_code: int  # 200, 304, or the error status (0 = no answer)
    etag: str | None = None
    suites: list[dict[str, Any]] = field(default_factory=list)
    rate_remaining: int | None = None
    rate_reset: float | None = None  # epoch seconds
    error: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status_code == 304

    @property
    def rate_limited(self) -> bool:
        """No more requests until `rate_reset`."""
        return self.rate_remaining == 0


class ChecksClient:
    """A small httpx client for the check-suites endpoint (one per sensor tick)."""

    def __init__(self, api_url: str, token: str | None = None, timeout: float = 15.0):
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "bench-pipeline-ci-sensor",
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        import httpx  # loaded by the sensor tick that polls, not with the definitions

        self._client = httpx.Client(base_url=api_url.rstrip("/"), headers=headers, timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ChecksClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def check_suites(self, repo: str, sha: str, etag: str | None = None) -> ChecksReply:
        import httpx

        headers = {"If-None-Match": etag} if etag else {}
        try:
            resp = self._client.get(
                f"/repos/{repo}/commits/{sha}/check-suites",
                params={"per_page": 100},
                headers=headers,
            )
        except httpx.HTTPError as exc:
            return ChecksReply(0, error=f"{type(exc).__name__}: {exc}")
        reply = ChecksReply(
            resp.status_code,
            etag=resp.headers.get("etag") or etag,
            rate_remaining=_int(resp.headers.get("x-ratelimit-remaining")),
            rate_reset=_float(resp.headers.get("x-ratelimit-reset")),
        )
        if resp.status_code == 200:
            try:
                reply.suites = list(resp.json().get("check_suites") or [])
            except ValueError:
                reply.status_code, reply.error = 0, "the checks API answered with invalid JSON"
        elif resp.status_code != 304:
            reply.error = f"HTTP {resp.status_code}: {resp.text[:200]}"
            if resp.status_code == 429 and reply.rate_remaining is None:
                retry = _float(resp.headers.get("retry-after"))
                reply.rate_remaining = 0
                reply.rate_reset = time.time() + (retry if retry is not None else 60.0)
        return reply


def verdict(suites: list[dict[str, Any]]) -> str:
    """success | failure | pending for a commit's check suites (see module doc).

    Suites with `latest_check_runs_count == 0` are ignored: GitHub creates a queued suite for
    every installed app, and one that runs nothing stays queued forever. No suite at all is
    pending (CI has not started yet).
    """
    relevant = [s for s in suites if s.get("latest_check_runs_count", 1) != 0]
    if any(
        s.get("status") == "completed" and s.get("conclusion") in FAILING_CONCLUSIONS
        for s in relevant
    ):
        return FAILURE
    if relevant and all(
        s.get("status") == "completed" and s.get("conclusion") in PASSING_CONCLUSIONS
        for s in relevant
    ):
        return SUCCESS
    return PENDING


def summarize(suites: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the score's details keep of each suite."""
    out = []
    for s in suites:
        app = s.get("app") or {}
        out.append(
            {
                "id": s.get("id"),
                "app": app.get("slug") or app.get("name"),
                "status": s.get("status"),
                "conclusion": s.get("conclusion"),
            }
        )
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
