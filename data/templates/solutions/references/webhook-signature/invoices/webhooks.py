"""Incoming webhooks from the payment provider.

The provider sends ``X-Invoices-Signature: t=<unix time>,v1=<hex hmac-sha256>``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable

SIGNATURE_HEADER = "X-Invoices-Signature"
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureError(Exception):
    pass


def sign(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """Build a signature header value (used by our own tests and the sandbox sender)."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},v1={_digest(secret, body, timestamp)}"


def _digest(secret: bytes, body: bytes, timestamp: int) -> str:
    signed = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()


def parse_signature(header: str) -> tuple[int, str]:
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        return int(parts["t"]), parts["v1"]
    except (KeyError, ValueError):
        raise SignatureError("malformed signature header") from None


def verify_signature(
    secret: bytes,
    body: bytes,
    header: str,
    *,
    now: float | None = None,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
) -> None:
    """Raise SignatureError unless `header` is a fresh, valid signature of `body`.

    The signature covers ``f"{t}." + body`` so that a captured request cannot be
    replayed with a new timestamp; requests older (or newer) than `tolerance`
    seconds are refused.
    """
    timestamp, received = parse_signature(header)
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        raise SignatureError("timestamp outside the tolerance window")
    expected = _digest(secret, body, timestamp)
    if not hmac.compare_digest(received.encode("ascii", "replace"), expected.encode("ascii")):
        raise SignatureError("signature mismatch")


Handler = Callable[[dict], None]


class WebhookReceiver:
    def __init__(self, secret: bytes):
        self._secret = secret
        self._handlers: dict[str, Handler] = {}

    def on(self, event_type: str, handler: Handler) -> None:
        self._handlers[event_type] = handler

    def receive(self, headers: dict, body: bytes) -> dict:
        header = headers.get(SIGNATURE_HEADER, "")
        verify_signature(self._secret, body, header)
        event = json.loads(body)
        handler = self._handlers.get(event.get("type"))
        if handler is None:
            return {"status": "ignored"}
        handler(event)
        return {"status": "processed"}
