"""AC: partial payments set status partially_paid (mode 'partial'); overpayments are refused (mode 'overpay')."""

import os
import sys
import tempfile

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

    from invoices.models import ValidationError, validate_invoice
    from invoices.payments import apply_payment
    from invoices.store import JsonStore

    payload = {
        "customer": "ACME",
        "issue_date": "2024-03-01",
        "lines": [{"description": "Support", "quantity": 1, "unit_price": "100.00"}],
    }
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonStore(os.path.join(tmp, "invoices.json"))
        invoice = validate_invoice(payload, "t1")
        invoice.status = "open"
        invoice_id = store.add(invoice).id
        if MODE == "overpay":
            for amount in ("120", "100.01"):
                try:
                    apply_payment(store, invoice_id, amount)
                except ValidationError:
                    pass
                else:
                    fail(f"a payment of {amount} on a 100.00 invoice was accepted")
                stored = store.get(invoice_id)
                check(
                    stored.amount_paid == 0 and stored.status == "open",
                    "a refused payment changed the invoice",
                )
            apply_payment(store, invoice_id, "30")
            try:
                apply_payment(store, invoice_id, "80")
            except ValidationError:
                pass
            else:
                fail("paying 80 on 70 outstanding was accepted")
            check(
                store.get(invoice_id).amount_paid == Decimal("30"),
                "refused payment changed amount_paid",
            )
            return
        apply_payment(store, invoice_id, "40")
        stored = store.get(invoice_id)
        check(
            stored.amount_paid == Decimal("40"), f"amount_paid is {stored.amount_paid}, expected 40"
        )
        check(
            stored.status == "partially_paid", f"status after paying 40 of 100 is {stored.status!r}"
        )
        apply_payment(store, invoice_id, "60.00")
        stored = store.get(invoice_id)
        check(
            stored.status == "paid" and stored.amount_paid == Decimal("100"),
            f"status after full payment: {stored.status}",
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
