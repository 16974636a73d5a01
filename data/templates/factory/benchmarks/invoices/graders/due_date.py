"""AC: validate_invoice refuses a due date before the issue date."""

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
    import datetime as dt

    from invoices.models import ValidationError, validate_invoice

    def payload(**extra):
        base = {
            "customer": "ACME",
            "issue_date": "2024-03-10",
            "lines": [{"description": "Support", "quantity": 1, "unit_price": "10"}],
        }
        base.update(extra)
        return base

    try:
        validate_invoice(payload(due_date="2024-03-09"), "t1")
    except ValidationError:
        pass
    else:
        fail("due_date before issue_date was accepted")
    same_day = validate_invoice(payload(due_date="2024-03-10"), "t1")
    check(
        same_day.due_date == dt.date(2024, 3, 10), "due_date equal to issue_date must be accepted"
    )
    default = validate_invoice(payload(), "t1")
    check(
        default.due_date == dt.date(2024, 4, 9), "default due date must stay issue_date + 30 days"
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
