"""Who may see and change which invoices.

Roles: ``viewer`` and ``owner`` belong to one tenant; ``admin`` administers a
tenant; ``support`` is our own staff.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import Invoice

ROLES = ("viewer", "owner", "admin", "support")


class PermissionDenied(Exception):
    pass


@dataclass(frozen=True)
class User:
    id: str
    tenant_id: str
    role: str = "viewer"


def can_read(user: User, invoice: Invoice) -> bool:
    same_tenant = user.tenant_id == invoice.tenant_id
    return same_tenant or user.role == "support"


def can_write(user: User, invoice: Invoice) -> bool:
    return user.role in ("owner", "admin") and user.tenant_id == invoice.tenant_id


def visible_invoices(user: User, invoices: list[Invoice]) -> list[Invoice]:
    return [invoice for invoice in invoices if can_read(user, invoice)]


def require(allowed: bool, message: str = "permission denied") -> None:
    if not allowed:
        raise PermissionDenied(message)
