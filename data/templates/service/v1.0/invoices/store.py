"""A tiny JSON-file store for invoices (one file per deployment)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from .models import Invoice

EMPTY = {"next_id": 1, "invoices": {}}


class NotFound(KeyError):
    pass


class JsonStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.RLock()

    def load(self) -> dict:
        if not self.path.exists():
            return json.loads(json.dumps(EMPTY))
        with open(self.path, encoding="utf-8") as fh:
            return json.load(fh)

    def save(self, data: dict) -> None:
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=str)

    def add(self, invoice: Invoice) -> Invoice:
        with self._lock:
            data = self.load()
            invoice.id = data["next_id"]
            data["next_id"] += 1
            data["invoices"][str(invoice.id)] = invoice.to_dict()
            self.save(data)
            return invoice

    def update(self, invoice: Invoice) -> Invoice:
        with self._lock:
            data = self.load()
            if str(invoice.id) not in data["invoices"]:
                raise NotFound(invoice.id)
            data["invoices"][str(invoice.id)] = invoice.to_dict()
            self.save(data)
            return invoice

    def get(self, invoice_id: int) -> Invoice:
        data = self.load()
        try:
            return Invoice.from_dict(data["invoices"][str(invoice_id)])
        except KeyError:
            raise NotFound(invoice_id) from None

    def list(self, tenant_id: str | None = None) -> list[Invoice]:
        invoices = [Invoice.from_dict(raw) for raw in self.load()["invoices"].values()]
        if tenant_id is not None:
            invoices = [inv for inv in invoices if inv.tenant_id == tenant_id]
        return sorted(invoices, key=lambda inv: inv.id)
