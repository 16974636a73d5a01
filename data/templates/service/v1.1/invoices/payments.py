"""Applying payments reported by the payment provider to invoices."""

from __future__ import annotations

from .models import ValidationError, parse_amount
from .store import JsonStore


def apply_payment(store: JsonStore, invoice_id: int, amount) -> object:
    """Record a payment of `amount` against an invoice and update its status."""
    amount = parse_amount(amount)
    if amount <= 0:
        raise ValidationError("payment amount must be positive")
    invoice = store.get(invoice_id)
    if invoice.status == "void":
        raise ValidationError("cannot pay a void invoice")
    invoice.amount_paid += amount
    invoice.status = "paid"
    return store.update(invoice)


def payment_handler(store: JsonStore):
    """Webhook handler for ``invoice.paid`` events."""

    def handle(event: dict) -> None:
        data = event["data"]
        apply_payment(store, int(data["invoice_id"]), data["amount"])

    return handle
