"""Incoming webhooks from the payment provider.

The provider sends ``X-Invoices-Signature: t=<unix time>,v1=<hex hmac-sha256>``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable

SIGNATURE_HEADER = "X-Invoices-Signature"

log = logging.getLogger(__name__)


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
        self._seen: set[str] = set()
        self._seen_lock = threading.Lock()

    def on(self, event_type: str, handler: Handler) -> None:
        self._handlers[event_type] = handler

    def receive(self, headers: dict, body: bytes) -> dict:
        header = headers.get(SIGNATURE_HEADER, "")
        verify_signature(self._secret, body, header)
        event = json.loads(body)
        event_id = event.get("id")
        log.info("webhook %s (%s)", event_id, event.get("type"))
        if event_id is not None:
            with self._seen_lock:
                if event_id in self._seen:
                    log.info("webhook %s already processed", event_id)
                    return {"status": "duplicate", "id": event_id}
                self._seen.add(event_id)
        handler = self._handlers.get(event.get("type"))
        if handler is None:
            return {"status": "ignored", "id": event_id}
        try:
            handler(event)
        except Exception:
            # let the provider retry a delivery we failed to process
            with self._seen_lock:
                self._seen.discard(event_id)
            raise
        return {"status": "processed", "id": event_id}
