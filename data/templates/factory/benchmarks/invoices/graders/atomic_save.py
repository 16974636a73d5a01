"""AC: JsonStore.save is atomic (mode 'intact') and leaves no temp files (mode 'cleanup')."""

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


class DiskFull:
    """Serialising this object fails, simulating a crash in the middle of a write."""

    def __str__(self):
        raise OSError(28, "No space left on device")

    __repr__ = __str__


def main():
    from invoices.store import JsonStore

    invoice = {
        "id": 1,
        "tenant_id": "t1",
        "customer": "ACME",
        "currency": "EUR",
        "issue_date": "2024-03-01",
        "due_date": "2024-03-31",
        "tax_rate": "0",
        "lines": [{"description": "Support", "quantity": 1, "unit_price": "10"}],
        "status": "open",
        "amount_paid": "0",
    }
    old = {"next_id": 2, "invoices": {"1": invoice}}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "invoices.json")
        store = JsonStore(path)
        store.save(old)
        check(JsonStore(path).load() == old, "a normal save must round-trip")
        check(
            sorted(os.listdir(tmp)) == ["invoices.json"],
            f"stray files after a save: {os.listdir(tmp)}",
        )
        new = {
            "next_id": 3,
            "invoices": {"1": invoice, "2": dict(invoice, id=2)},
            "zz_crash": DiskFull(),
        }
        try:
            store.save(new)
        except Exception:
            pass
        if MODE == "cleanup":
            left = sorted(os.listdir(tmp))
            check(
                left == ["invoices.json"],
                f"temporary files left behind after a failed save: {left}",
            )
            store.save({"next_id": 2, "invoices": {"1": invoice}})
            check(sorted(os.listdir(tmp)) == ["invoices.json"], "stray files after a later save")
        else:
            try:
                after = JsonStore(path).load()
            except ValueError as exc:
                fail(f"store file corrupted by a failed save: {exc}")
            check(after == old, "a failed save must leave the previous content in place")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
