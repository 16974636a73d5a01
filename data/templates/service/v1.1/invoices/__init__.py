"""invoices: a small multi-tenant invoicing service (standard library only)."""

__version__ = "1.1.0"
