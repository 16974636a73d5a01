"""Customer balances: deposits, withdrawals and transfers between accounts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .models import parse_amount


class LedgerError(Exception):
    pass


class UnknownAccount(LedgerError):
    pass


class AccountFrozen(LedgerError):
    pass


class InsufficientFunds(LedgerError):
    pass


@dataclass(frozen=True)
class Entry:
    account: str
    delta: Decimal
    memo: str


class Ledger:
    def __init__(self):
        self._balances: dict[str, Decimal] = {}
        self._frozen: set[str] = set()
        self._entries: list[Entry] = []

    def open_account(self, name: str, balance="0") -> None:
        if name in self._balances:
            raise LedgerError(f"account {name!r} already exists")
        self._balances[name] = parse_amount(balance)

    def freeze(self, name: str) -> None:
        self._require(name)
        self._frozen.add(name)

    def balance(self, name: str) -> Decimal:
        self._require(name)
        return self._balances[name]

    def entries(self, name: str | None = None) -> list[Entry]:
        return [e for e in self._entries if name is None or e.account == name]

    def deposit(self, name: str, amount, memo: str = "deposit") -> None:
        amount = self._positive(amount)
        self._writable(name)
        self._balances[name] += amount
        self._entries.append(Entry(name, amount, memo))

    def withdraw(self, name: str, amount, memo: str = "withdrawal") -> None:
        amount = self._positive(amount)
        self._writable(name)
        self._balances[name] -= amount
        self._entries.append(Entry(name, -amount, memo))

    def transfer(self, source: str, destination: str, amount, memo: str = "transfer") -> None:
        """Move `amount` from `source` to `destination`."""
        if source == destination:
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

    def _require(self, name: str) -> None:
        if name not in self._balances:
            raise UnknownAccount(name)

    def _writable(self, name: str) -> None:
        self._require(name)
        if name in self._frozen:
            raise AccountFrozen(name)

    @staticmethod
    def _positive(amount) -> Decimal:
        amount = parse_amount(amount)
        if amount <= 0:
            raise LedgerError("amount must be positive")
        return amount
