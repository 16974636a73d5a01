"""AC: concurrent create_invoice calls with one idempotency key create exactly one invoice."""

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
    import threading
    import time

    from invoices.access import User
    from invoices.service import InvoiceService
    from invoices.store import JsonStore

    class SlowStore(JsonStore):
        def add(self, invoice):
            time.sleep(0.005)  # a slow disk makes concurrent retries overlap
            return super().add(invoice)

    payload = {
        "customer": "ACME",
        "issue_date": "2024-03-01",
        "lines": [{"description": "Support", "quantity": 1, "unit_price": "10"}],
    }
    user = User("u1", "t1", "owner")
    with tempfile.TemporaryDirectory() as tmp:
        store = SlowStore(os.path.join(tmp, "invoices.json"))
        service = InvoiceService(store)
        barrier = threading.Barrier(8)
        ids, errors = [], []

        def worker():
            barrier.wait()
            try:
                ids.append(service.create_invoice(user, payload, idempotency_key="order-42").id)
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        check(not errors, f"create_invoice raised: {errors[:1]}")
        check(len(set(ids)) == 1, f"one idempotency key produced invoices {sorted(set(ids))}")
        check(len(store.list()) == 1, f"{len(store.list())} invoices stored for one key")
        other = service.create_invoice(user, payload, idempotency_key="order-43")
        check(other.id != ids[0] and len(store.list()) == 2, "a new key must create a new invoice")
        again = service.create_invoice(user, payload, idempotency_key="order-42")
        check(again.id == ids[0], "a later retry must return the first invoice")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
