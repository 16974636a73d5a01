"""AC: withdrawals and transfers beyond the balance raise InsufficientFunds."""

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

    from invoices.ledger import InsufficientFunds, Ledger

    ledger = Ledger()
    ledger.open_account("alice", "10.00")
    ledger.open_account("bob", "0")
    for action in (
        lambda: ledger.withdraw("alice", "15"),
        lambda: ledger.transfer("alice", "bob", "10.01"),
    ):
        try:
            action()
        except InsufficientFunds:
            pass
        else:
            fail("overdraft was allowed")
        check(
            ledger.balance("alice") == Decimal("10.00"), "balance changed by a refused withdrawal"
        )
        check(ledger.balance("bob") == Decimal("0"), "destination credited by a refused transfer")
    ledger.transfer("alice", "bob", "10.00")
    check(
        ledger.balance("alice") == 0 and ledger.balance("bob") == Decimal("10.00"),
        "withdrawing the exact balance must be allowed",
    )


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
