"""Authoring helper: writes solved files under templates/solutions by editing the base.

The solutions are then formatted with ruff (so that `ruff format` of the repository does
not change them); run authoring/make_patches.py afterwards to regenerate the patches.
"""

import pathlib
import subprocess
import sys

T = pathlib.Path(__file__).resolve().parent.parent / "templates"
SOL = T / "solutions"


def base(ref, rel):
    p = T / "service" / ref / rel
    if ref == "v1.1" and not p.exists():
        p = T / "service" / "v1.0" / rel
    return p.read_text()


def put(kind, task, ref, rel, edits):
    s = base(ref, rel)
    for old, new in edits:
        if s.count(old) != 1:
            raise SystemExit(f"{task}: edit does not match the base exactly once: {old[:80]!r}")
        s = s.replace(old, new)
    out = SOL / kind / task / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(s)


M, ST, L, R, A, SV, W, P = (
    "invoices/models.py",
    "invoices/store.py",
    "invoices/ledger.py",
    "invoices/ratelimit.py",
    "invoices/access.py",
    "invoices/service.py",
    "invoices/webhooks.py",
    "invoices/payments.py",
)

# 1 amount-precision
put(
    "references",
    "amount-precision",
    "v1.0",
    M,
    [
        (
            """    if not amount.is_finite():
        raise ValidationError(f"invalid amount: {raw!r}")
    return amount
""",
            """    if not amount.is_finite():
        raise ValidationError(f"invalid amount: {raw!r}")
    if amount < 0:
        raise ValidationError(f"amount must not be negative: {raw!r}")
    if amount.as_tuple().exponent < -2:
        raise ValidationError(f"amount has more than two decimals: {raw!r}")
    return amount
""",
        )
    ],
)
put(
    "originals",
    "amount-precision",
    "v1.0",
    M,
    [
        (
            """from decimal import Decimal, InvalidOperation
""",
            """from decimal import Decimal, InvalidOperation

CENT = Decimal("0.01")
""",
        ),
        (
            """    if not amount.is_finite():
        raise ValidationError(f"invalid amount: {raw!r}")
    return amount
""",
            """    if not amount.is_finite() or amount.is_signed():
        raise ValidationError(f"invalid amount: {raw!r}")
    if amount != amount.quantize(CENT):
        raise ValidationError(f"amounts are limited to cents: {raw!r}")
    return amount
""",
        ),
    ],
)

# 2 currency-code
put(
    "references",
    "currency-code",
    "v1.0",
    M,
    [
        (
            """    currency = str(payload.get("currency", "EUR")).strip().upper()
""",
            """    currency = str(payload.get("currency", "EUR")).strip().upper()
    if currency not in SUPPORTED_CURRENCIES:
        raise ValidationError(
            f"unsupported currency {currency!r}; expected one of {', '.join(SUPPORTED_CURRENCIES)}"
        )
""",
        )
    ],
)

# 3 due-date-order
put(
    "references",
    "due-date-order",
    "v1.0",
    M,
    [
        (
            """        due_date = issue_date + dt.timedelta(days=DEFAULT_PAYMENT_TERMS_DAYS)
""",
            """        due_date = issue_date + dt.timedelta(days=DEFAULT_PAYMENT_TERMS_DAYS)
    if due_date < issue_date:
        raise ValidationError("due_date must not be before issue_date")
""",
        )
    ],
)

# 4 tax-rounding
put(
    "references",
    "tax-rounding",
    "v1.0",
    M,
    [
        (
            """from decimal import Decimal, InvalidOperation
""",
            """from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
""",
        ),
        (
            """        return Decimal(str(round(float(self.subtotal) * float(self.tax_rate), 2)))
""",
            """        return (self.subtotal * self.tax_rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
""",
        ),
    ],
)

# 5 atomic-save
put(
    "references",
    "atomic-save",
    "v1.0",
    ST,
    [
        (
            """import json
import threading
""",
            """import json
import os
import tempfile
import threading
""",
        ),
        (
            """    def save(self, data: dict) -> None:
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=str)
""",
            '''    def save(self, data: dict) -> None:
        """Write atomically: a crash leaves either the old file or the new one, never half."""
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, sort_keys=True, default=str)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
''',
        ),
    ],
)
put(
    "originals",
    "atomic-save",
    "v1.0",
    ST,
    [
        (
            """import json
import threading
""",
            """import json
import os
import threading
""",
        ),
        (
            """    def save(self, data: dict) -> None:
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=str)
""",
            """    def save(self, data: dict) -> None:
        # write to a temporary file first, then atomically swap it in
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=str)
        os.replace(tmp, self.path)
""",
        ),
    ],
)

# 6 insufficient-funds
put(
    "references",
    "insufficient-funds",
    "v1.0",
    L,
    [
        (
            """        amount = self._positive(amount)
        self._writable(name)
        self._balances[name] -= amount
""",
            """        amount = self._positive(amount)
        self._writable(name)
        if self._balances[name] < amount:
            raise InsufficientFunds(
                f"{name}: balance {self._balances[name]} is less than {amount}"
            )
        self._balances[name] -= amount
""",
        )
    ],
)

# 7 ledger-rollback
put(
    "references",
    "ledger-rollback",
    "v1.0",
    L,
    [
        (
            """        if source == destination:
            raise LedgerError("cannot transfer to the same account")
        self.withdraw(source, amount, memo)
        self.deposit(destination, amount, memo)
""",
            """        if source == destination:
            raise LedgerError("cannot transfer to the same account")
        balances = dict(self._balances)
        entry_count = len(self._entries)
        try:
            self.withdraw(source, amount, memo)
            self.deposit(destination, amount, memo)
        except BaseException:
            # all or nothing: undo the half-applied transfer
            self._balances = balances
            del self._entries[entry_count:]
            raise
""",
        )
    ],
)

# 8 rate-limiter-threads
put(
    "references",
    "rate-limiter-threads",
    "v1.0",
    R,
    [
        (
            """        self._lock = threading.Lock()  # guards reset()
""",
            """        self._lock = threading.Lock()  # guards _windows
""",
        ),
        (
            '''        """Record one request for `key`; return False when it exceeds the limit."""
        count, started = self._windows.get(key, (0, None))
        now = self._clock()
        if started is None or now - started >= self.window_seconds:
            count, started = 0, now
        if count >= self.limit:
            return False
        self._windows[key] = (count + 1, started)
        return True
''',
            '''        """Record one request for `key`; return False when it exceeds the limit.

        Thread-safe: the read-check-write of the window happens under one lock.
        """
        with self._lock:
            count, started = self._windows.get(key, (0, None))
            now = self._clock()
            if started is None or now - started >= self.window_seconds:
                count, started = 0, now
            if count >= self.limit:
                return False
            self._windows[key] = (count + 1, started)
            return True
''',
        ),
        (
            """        count, started = self._windows.get(key, (0, None))
        if started is None or self._clock() - started >= self.window_seconds:
""",
            """        with self._lock:
            count, started = self._windows.get(key, (0, None))
        if started is None or self._clock() - started >= self.window_seconds:
""",
        ),
    ],
)
put(
    "originals",
    "rate-limiter-threads",
    "v1.0",
    R,
    [
        (
            """        self._lock = threading.Lock()  # guards reset()
""",
            """        self._lock = threading.Lock()  # guards _windows
""",
        ),
        (
            """        if count >= self.limit:
            return False
        self._windows[key] = (count + 1, started)
        return True
""",
            """        if count >= self.limit:
            return False
        with self._lock:
            self._windows[key] = (count + 1, started)
        return True
""",
        ),
    ],
)

# 9 idempotent-create
put(
    "references",
    "idempotent-create",
    "v1.0",
    SV,
    [
        (
            """from __future__ import annotations

""",
            """from __future__ import annotations

import threading

""",
        ),
        (
            """        self._idempotency: dict[str, int] = {}
""",
            """        self._idempotency: dict[str, int] = {}
        self._idempotency_lock = threading.Lock()
""",
        ),
        (
            """        if idempotency_key is not None and idempotency_key in self._idempotency:
            return self._store.get(self._idempotency[idempotency_key])
        invoice = validate_invoice(payload, tenant_id=user.tenant_id)
        invoice.status = "open"
        invoice = self._store.add(invoice)
        if idempotency_key is not None:
            self._idempotency[idempotency_key] = invoice.id
        return invoice
""",
            """        if idempotency_key is None:
            return self._create(user, payload)
        # Hold the lock across check-create-record so that concurrent retries with the
        # same key cannot both create an invoice.
        with self._idempotency_lock:
            if idempotency_key in self._idempotency:
                return self._store.get(self._idempotency[idempotency_key])
            invoice = self._create(user, payload)
            self._idempotency[idempotency_key] = invoice.id
            return invoice

    def _create(self, user: User, payload: dict):
        invoice = validate_invoice(payload, tenant_id=user.tenant_id)
        invoice.status = "open"
        return self._store.add(invoice)
""",
        ),
    ],
)

# 10 tenant-isolation
put(
    "references",
    "tenant-isolation",
    "v1.0",
    A,
    [
        (
            """def can_read(user: User, invoice: Invoice) -> bool:
    if user.role in ("admin", "support"):
        return True
    return user.tenant_id == invoice.tenant_id
""",
            """def can_read(user: User, invoice: Invoice) -> bool:
    # Only our own support staff read across tenants; admins administer one tenant.
    if user.role == "support":
        return True
    return user.tenant_id == invoice.tenant_id
""",
        )
    ],
)
put(
    "originals",
    "tenant-isolation",
    "v1.0",
    A,
    [
        (
            """def can_read(user: User, invoice: Invoice) -> bool:
    if user.role in ("admin", "support"):
        return True
    return user.tenant_id == invoice.tenant_id
""",
            """def can_read(user: User, invoice: Invoice) -> bool:
    same_tenant = user.tenant_id == invoice.tenant_id
    return same_tenant or user.role == "support"
""",
        )
    ],
)

# 11 pagination
put(
    "references",
    "pagination",
    "v1.0",
    SV,
    [
        (
            """DEFAULT_PER_PAGE = 20
""",
            """DEFAULT_PER_PAGE = 20
MAX_PER_PAGE = 100
""",
        ),
        (
            """        invoices = visible_invoices(user, self._store.list(tenant_id=user.tenant_id))
        start = page * per_page
        items = invoices[start : start + per_page]
        next_page = page + 1 if start + per_page <= len(invoices) else None
""",
            """        if page < 1:
            raise ValueError("page must be >= 1")
        if not 1 <= per_page <= MAX_PER_PAGE:
            raise ValueError(f"per_page must be between 1 and {MAX_PER_PAGE}")
        invoices = visible_invoices(user, self._store.list(tenant_id=user.tenant_id))
        start = (page - 1) * per_page
        items = invoices[start : start + per_page]
        next_page = page + 1 if start + per_page < len(invoices) else None
""",
        ),
    ],
)
put(
    "originals",
    "pagination",
    "v1.0",
    SV,
    [
        (
            """        invoices = visible_invoices(user, self._store.list(tenant_id=user.tenant_id))
        start = page * per_page
        items = invoices[start : start + per_page]
        next_page = page + 1 if start + per_page <= len(invoices) else None
""",
            """        if page < 1 or per_page < 1 or per_page > 100:
            raise ValueError("invalid pagination parameters")
        invoices = visible_invoices(user, self._store.list(tenant_id=user.tenant_id))
        offset = (page - 1) * per_page
        items = invoices[offset : offset + per_page]
        has_more = offset + len(items) < len(invoices)
        next_page = page + 1 if has_more else None
""",
        )
    ],
)

# 12 webhook-signature
put(
    "references",
    "webhook-signature",
    "v1.0",
    W,
    [
        (
            """SIGNATURE_HEADER = "X-Invoices-Signature"
""",
            """SIGNATURE_HEADER = "X-Invoices-Signature"
DEFAULT_TOLERANCE_SECONDS = 300
""",
        ),
        (
            """    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"
""",
            """    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},v1={_digest(secret, body, timestamp)}"


def _digest(secret: bytes, body: bytes, timestamp: int) -> str:
    signed = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret, signed, hashlib.sha256).hexdigest()
""",
        ),
        (
            '''def verify_signature(secret: bytes, body: bytes, header: str) -> None:
    """Raise SignatureError unless `header` is a valid signature of `body`."""
    _timestamp, received = parse_signature(header)
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    if received != expected:
        raise SignatureError("signature mismatch")
''',
            '''def verify_signature(secret: bytes, body: bytes, header: str, *, now: float | None = None,
                     tolerance: int = DEFAULT_TOLERANCE_SECONDS) -> None:
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
''',
        ),
    ],
)

# 13 webhook-dedup (v1.1)
put(
    "references",
    "webhook-dedup",
    "v1.1",
    W,
    [
        (
            """import logging
import time
""",
            """import logging
import threading
import time
""",
        ),
        (
            """        self._secret = secret
        self._handlers: dict[str, Handler] = {}
""",
            """        self._secret = secret
        self._handlers: dict[str, Handler] = {}
        self._seen: set[str] = set()
        self._seen_lock = threading.Lock()
""",
        ),
        (
            """        handler = self._handlers.get(event.get("type"))
        if handler is None:
            return {"status": "ignored", "id": event_id}
        handler(event)
        return {"status": "processed", "id": event_id}""",
            """        if event_id is not None:
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
        return {"status": "processed", "id": event_id}""",
        ),
    ],
)

# 14 partial-payment (v1.1)
put(
    "references",
    "partial-payment",
    "v1.1",
    P,
    [
        (
            """    if invoice.status == "void":
        raise ValidationError("cannot pay a void invoice")
    invoice.amount_paid += amount
    invoice.status = "paid"
    return store.update(invoice)
""",
            """    if invoice.status == "void":
        raise ValidationError("cannot pay a void invoice")
    outstanding = invoice.total - invoice.amount_paid
    if amount > outstanding:
        raise ValidationError(f"payment {amount} exceeds the outstanding {outstanding}")
    invoice.amount_paid += amount
    invoice.status = "paid" if invoice.amount_paid >= invoice.total else "partially_paid"
    return store.update(invoice)
""",
        )
    ],
)
subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(SOL)], check=True)
print("solutions written and formatted")
