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


class SignatureError(Exception):
    pass


def sign(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """Build a signature header value (used by our own tests and the sandbox sender)."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def parse_signature(header: str) -> tuple[int, str]:
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        return int(parts["t"]), parts["v1"]
    except (KeyError, ValueError):
        raise SignatureError("malformed signature header") from None


def verify_signature(secret: bytes, body: bytes, header: str) -> None:
    """Raise SignatureError unless `header` is a valid signature of `body`."""
    _timestamp, received = parse_signature(header)
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if received != expected:
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
