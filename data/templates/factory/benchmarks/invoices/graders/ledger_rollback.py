"""AC: a transfer that fails half-way leaves balances and entries unchanged."""

import os
import sys

sys.dont_write_bytecode = True
if len(sys.argv) < 2 or not os.path.isdir(sys.argv[1]):
    print("usage: grader WORKSPACE [MODE]")
    sys.exit(2)
sys.path.insert(0, sys.argv[1])
MODE = sys.argv[2] if len(sys.argv) > 2 else ""


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def main():
    from decimal import Decimal

    from invoices.ledger import Ledger, LedgerError

    ledger = Ledger()
    ledger.open_account("alice", "100")
    ledger.open_account("frozen", "0")
    ledger.open_account("carol", "0")
    ledger.freeze("frozen")
    entries_before = len(ledger.entries())
    for destination in ("frozen", "nobody"):
        try:
            ledger.transfer("alice", destination, "30")
        except LedgerError:
            pass
        else:
            fail(f"transfer to {destination!r} did not raise")
        check(
            ledger.balance("alice") == Decimal("100"),
            f"alice lost money in a failed transfer to {destination!r}: {ledger.balance('alice')}",
        )
        check(len(ledger.entries()) == entries_before, "a failed transfer left journal entries")
    ledger.transfer("alice", "carol", "40")
    check(
        ledger.balance("alice") == Decimal("60") and ledger.balance("carol") == Decimal("40"),
        "a valid transfer after a failed one must still work",
    )
    check(len(ledger.entries()) == entries_before + 2, "a transfer must write two entries")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
