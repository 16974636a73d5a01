"""Invoice domain model and input validation."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

SUPPORTED_CURRENCIES = ("EUR", "USD", "GBP", "CHF")
STATUSES = ("draft", "open", "paid", "void")
DEFAULT_PAYMENT_TERMS_DAYS = 30


class ValidationError(ValueError):
    """Raised when user input cannot be turned into a valid invoice."""


def parse_amount(raw) -> Decimal:
    """Parse a money amount from user input ("12.50", 12.5 or a Decimal)."""
    if isinstance(raw, bool) or raw is None:
        raise ValidationError("amount must be a number")
    try:
        amount = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError(f"invalid amount: {raw!r}") from None
    if not amount.is_finite():
        raise ValidationError(f"invalid amount: {raw!r}")
    return amount


def parse_date(raw) -> dt.date:
    if isinstance(raw, dt.date):
        return raw
    try:
        return dt.date.fromisoformat(str(raw))
    except ValueError:
        raise ValidationError(f"invalid date: {raw!r}") from None


@dataclass
class LineItem:
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self) -> Decimal:
        return self.unit_price * self.quantity

    def to_dict(self) -> dict:
        return {
            "description": self.description,
            "quantity": self.quantity,
            "unit_price": str(self.unit_price),
        }


@dataclass
class Invoice:
    tenant_id: str
    customer: str
    currency: str
    issue_date: dt.date
    due_date: dt.date
    lines: list[LineItem] = field(default_factory=list)
    tax_rate: Decimal = Decimal("0")
    status: str = "draft"
    amount_paid: Decimal = Decimal("0")
    id: int | None = None

    @property
    def subtotal(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal("0"))

    @property
    def tax(self) -> Decimal:
        return (self.subtotal * self.tax_rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    @property
    def total(self) -> Decimal:
        return self.subtotal + self.tax

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "customer": self.customer,
            "currency": self.currency,
            "issue_date": self.issue_date.isoformat(),
            "due_date": self.due_date.isoformat(),
            "lines": [line.to_dict() for line in self.lines],
            "tax_rate": str(self.tax_rate),
            "status": self.status,
            "amount_paid": str(self.amount_paid),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Invoice:
        return cls(
            id=data.get("id"),
            tenant_id=data["tenant_id"],
            customer=data["customer"],
            currency=data["currency"],
            issue_date=dt.date.fromisoformat(data["issue_date"]),
            due_date=dt.date.fromisoformat(data["due_date"]),
            lines=[
                LineItem(item["description"], int(item["quantity"]), Decimal(item["unit_price"]))
                for item in data.get("lines", [])
            ],
            tax_rate=Decimal(data.get("tax_rate", "0")),
            status=data.get("status", "draft"),
            amount_paid=Decimal(data.get("amount_paid", "0")),
        )


def validate_line(raw: dict) -> LineItem:
    description = str(raw.get("description", "")).strip()
    if not description:
        raise ValidationError("line description is required")
    try:
        quantity = int(raw.get("quantity", 1))
    except (TypeError, ValueError):
        raise ValidationError("line quantity must be an integer") from None
    if quantity < 1:
        raise ValidationError("line quantity must be at least 1")
    return LineItem(description, quantity, parse_amount(raw.get("unit_price")))


def validate_invoice(payload: dict, tenant_id: str) -> Invoice:
    """Turn an API payload into an Invoice, raising ValidationError on bad input."""
    customer = str(payload.get("customer", "")).strip()
    if not customer:
        raise ValidationError("customer is required")
    currency = str(payload.get("currency", "EUR")).strip().upper()
    issue_date = parse_date(payload.get("issue_date", dt.date.today().isoformat()))
    if "due_date" in payload:
        due_date = parse_date(payload["due_date"])
    else:
        due_date = issue_date + dt.timedelta(days=DEFAULT_PAYMENT_TERMS_DAYS)
    lines = [validate_line(item) for item in payload.get("lines", [])]
    if not lines:
        raise ValidationError("an invoice needs at least one line")
    tax_rate = parse_amount(payload.get("tax_rate", "0"))
    if not Decimal("0") <= tax_rate < Decimal("1"):
        raise ValidationError("tax_rate must be between 0 and 1")
    return Invoice(
        tenant_id=tenant_id,
        customer=customer,
        currency=currency,
        issue_date=issue_date,
        due_date=due_date,
        lines=lines,
        tax_rate=tax_rate,
    )
