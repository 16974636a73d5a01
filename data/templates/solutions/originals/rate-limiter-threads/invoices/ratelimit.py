"""Fixed-window, in-memory rate limiting per key (usually the tenant id)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    def __init__(
        self, limit: int, window_seconds: float = 60.0, clock: Callable[[], float] = time.monotonic
    ):
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.window_seconds = window_seconds
        self._clock = clock
        self._windows: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()  # guards _windows

    def allow(self, key: str) -> bool:
        """Record one request for `key`; return False when it exceeds the limit."""
        count, started = self._windows.get(key, (0, None))
        now = self._clock()
        if started is None or now - started >= self.window_seconds:
            count, started = 0, now
        if count >= self.limit:
            return False
        with self._lock:
            self._windows[key] = (count + 1, started)
        return True

    def remaining(self, key: str) -> int:
        count, started = self._windows.get(key, (0, None))
        if started is None or self._clock() - started >= self.window_seconds:
            return self.limit
        return max(self.limit - count, 0)

    def reset(self, key: str | None = None) -> None:
        with self._lock:
            if key is None:
                self._windows.clear()
            else:
                self._windows.pop(key, None)
