"""AC: validate_invoice accepts only supported ISO currency codes."""

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
    from invoices.models import ValidationError, validate_invoice

    def payload(**extra):
        base = {
            "customer": "ACME",
            "issue_date": "2024-03-01",
            "lines": [{"description": "Support", "quantity": 1, "unit_price": "10"}],
        }
        base.update(extra)
        return base

    check(
        validate_invoice(payload(), "t1").currency == "EUR", "missing currency must default to EUR"
    )
    check(
        validate_invoice(payload(currency=" usd "), "t1").currency == "USD",
        "' usd ' must become USD",
    )
    check(
        validate_invoice(payload(currency="chf"), "t1").currency == "CHF", "'chf' must become CHF"
    )
    for bad in ("XYZ", "EURO", "", "12"):
        try:
            validate_invoice(payload(currency=bad), "t1")
        except ValidationError:
            continue
        fail(f"currency {bad!r} was accepted")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
