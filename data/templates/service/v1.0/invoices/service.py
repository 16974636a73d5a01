"""Application service: the operations behind the HTTP API."""

from __future__ import annotations

from .access import User, can_read, can_write, require, visible_invoices
from .models import validate_invoice
from .ratelimit import RateLimiter
from .store import JsonStore

DEFAULT_PER_PAGE = 20


class RateLimited(Exception):
    pass


class InvoiceService:
    def __init__(self, store: JsonStore, limiter: RateLimiter | None = None):
        self._store = store
        self._limiter = limiter
        self._idempotency: dict[str, int] = {}

    def create_invoice(self, user: User, payload: dict, idempotency_key: str | None = None):
        """Create an invoice; retries with the same idempotency key return the first one."""
        if self._limiter is not None and not self._limiter.allow(user.tenant_id):
            raise RateLimited(user.tenant_id)
        if idempotency_key is not None and idempotency_key in self._idempotency:
            return self._store.get(self._idempotency[idempotency_key])
        invoice = validate_invoice(payload, tenant_id=user.tenant_id)
        invoice.status = "open"
        invoice = self._store.add(invoice)
        if idempotency_key is not None:
            self._idempotency[idempotency_key] = invoice.id
        return invoice

    def get_invoice(self, user: User, invoice_id: int):
        invoice = self._store.get(invoice_id)
        require(can_read(user, invoice))
        return invoice

    def void_invoice(self, user: User, invoice_id: int):
        invoice = self._store.get(invoice_id)
        require(can_write(user, invoice))
        invoice.status = "void"
        return self._store.update(invoice)

    def list_invoices(self, user: User, page: int = 1, per_page: int = DEFAULT_PER_PAGE) -> dict:
        """Return one page (1-based) of the invoices the user may see."""
        invoices = visible_invoices(user, self._store.list(tenant_id=user.tenant_id))
        start = page * per_page
        items = invoices[start : start + per_page]
        next_page = page + 1 if start + per_page <= len(invoices) else None
        return {
            "items": items,
            "page": page,
            "per_page": per_page,
            "total": len(invoices),
            "next_page": next_page,
        }
