"""Per-trial JSONL transcript of every model call, tool call and result, with secrets redacted.

Redaction is the second line of defence (the first: agents never see the harness's environment)
and covers each secret as written, reversed, base64 (standard and URL-safe, at any alignment in
a longer base64 text), URL-encoded and hex. The transcript is capped (BENCH_MAX_TRANSCRIPT_BYTES,
default 20 MB); past the cap one `truncated` event is written and the rest is only counted.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_pipeline.workspace.process import evidence_cap

REDACTED = "[REDACTED]"
MAX_TRANSCRIPT_BYTES = 20_000_000
# The shortest base64 core worth redacting: shorter runs would hit ordinary text.
MIN_CORE = 8


def _base64_cores(raw: bytes) -> set[str]:
    """Substrings present in any base64 text that encodes `raw` somewhere inside it: for each
    of the three alignments, the characters that depend only on `raw`'s bytes."""
    out = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        full = encode(raw).decode()
        out |= {full, full.rstrip("=")}
        for shift in (1, 2):
            enc = encode(b"\0" * shift + raw).decode().rstrip("=")
            # The first 4 chars mix the padding bytes in; the last (partial) group mixes the
            # next unknown byte: keep what lies strictly between.
            core = enc[4 : len(enc) - 4]
            if len(core) >= MIN_CORE:
                out.add(core)
        core = full.rstrip("=")[: (len(raw) // 3) * 4]
        if len(core) >= MIN_CORE:
            out.add(core)
    return out


def secret_forms(secret: str) -> set[str]:
    """Every form of `secret` redaction removes."""
    forms: set[str] = set()
    for value in (secret, secret[::-1]):
        raw = value.encode()
        forms |= {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
        forms |= _base64_cores(raw)
        hexed = binascii.hexlify(raw).decode()
        forms |= {hexed, hexed.upper()}
    return {f for f in forms if f}


class Transcript:
    """Appends events to `transcript.jsonl`. Every secret value is replaced before writing."""

    def __init__(
        self, path: Path | None, secrets: Iterable[str] = (), max_bytes: int | None = None
    ):
        self.path = path
        # Short values (e.g. "1") would redact half the transcript; real secrets are long.
        values = {s for s in secrets if s and len(s) >= 6}
        forms = set().union(*(secret_forms(v) for v in values)) if values else set()
        self._secrets = sorted(forms, key=len, reverse=True)
        self._lock = threading.Lock()
        self.max_bytes = (
            max_bytes
            if max_bytes is not None
            else evidence_cap("BENCH_MAX_TRANSCRIPT_BYTES", MAX_TRANSCRIPT_BYTES)
        )
        self.written = 0  # bytes in the file
        self.full_bytes = 0  # bytes it would hold without the cap
        # Opened on the first event and kept (each line flushed at once): an open per event
        # was a quarter of a text case's file work. `close()` when the trial ends.
        self._file: Any = None

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def write(self, event: str, **data: Any) -> None:
        if self.path is None:
            return
        record = {"ts": round(time.time(), 3), "event": event, **data}
        line = self.redact(json.dumps(record, default=str, ensure_ascii=False)) + "\n"
        try:
            size = len(line.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate an agent reported: written \u-escaped
            line = self.redact(json.dumps(record, default=str)) + "\n"
            size = len(line.encode("utf-8"))
        with self._lock:
            was_full = self.truncated
            self.full_bytes += size
            if was_full:
                return
            if self.written + size > self.max_bytes:
                line = json.dumps({"ts": record["ts"], "event": "truncated", "cap": self.max_bytes})
                line += "\n"
                size = len(line)
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
            self._file.write(line)
            self._file.flush()  # readers (and a crash) see every event as it happens
            self.written += size

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    @property
    def truncated(self) -> bool:
        return self.full_bytes > self.written


NULL_TRANSCRIPT = Transcript(None)
