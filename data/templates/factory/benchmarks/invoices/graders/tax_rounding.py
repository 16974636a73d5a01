"""AC: invoice tax is a Decimal rounded half-up to cents."""

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
    from decimal import ROUND_HALF_UP, Decimal

    from invoices.models import validate_invoice

    cases = [
        ("2.50", 1, "0.25"),
        ("0.05", 1, "0.5"),
        ("19.99", 3, "0.19"),
        ("10.25", 2, "0.075"),
        ("100", 1, "0.2"),
    ]
    for price, qty, rate in cases:
        invoice = validate_invoice(
            {
                "customer": "ACME",
                "issue_date": "2024-03-01",
                "tax_rate": rate,
                "lines": [{"description": "Item", "quantity": qty, "unit_price": price}],
            },
            "t1",
        )
        expected = (Decimal(price) * qty * Decimal(rate)).quantize(Decimal("0.01"), ROUND_HALF_UP)
        check(isinstance(invoice.tax, Decimal), "tax must be a Decimal")
        check(
            invoice.tax == expected,
            f"tax of {qty} x {price} at {rate} is {invoice.tax}, expected {expected}",
        )
        check(invoice.total == invoice.subtotal + expected, "total must be subtotal + tax")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
