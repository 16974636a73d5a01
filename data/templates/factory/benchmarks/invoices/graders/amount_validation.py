"""AC: parse_amount rejects negative amounts and more than two decimals."""

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

    from invoices.models import ValidationError, parse_amount, validate_line

    for good, expected in (
        ("12.5", "12.5"),
        ("12.50", "12.50"),
        ("7", "7"),
        (0.1, "0.1"),
        ("0", "0"),
    ):
        check(parse_amount(good) == Decimal(expected), f"parse_amount({good!r}) != {expected}")
    for bad in ("12.345", "0.001", "-5", "-0.01", "abc"):
        try:
            parse_amount(bad)
        except ValidationError:
            continue
        fail(f"parse_amount({bad!r}) was accepted")
    try:
        validate_line({"description": "Hosting", "quantity": 1, "unit_price": "9.999"})
    except ValidationError:
        pass
    else:
        fail("a line with unit_price 9.999 was accepted")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
