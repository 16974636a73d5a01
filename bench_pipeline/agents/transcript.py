"""Per-trial JSONL transcript of every model call, tool call and result, with secrets redacted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REDACTED = "[REDACTED]"


class Transcript:
    """Appends events to `transcript.jsonl`. Every secret value is replaced before writing."""

    def __init__(self, path: Path | None, secrets: Iterable[str] = ()):
        self.path = path
        # Short values (e.g. "1") would redact half the transcript; real secrets are long.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)
        self._lock = threading.Lock()

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def write(self, event: str, **data: Any) -> None:
        if self.path is None:
            return
        record = {"ts": round(time.time(), 3), "event": event, **data}
        line = self.redact(json.dumps(record, default=str, ensure_ascii=False))
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


NULL_TRANSCRIPT = Transcript(None)
