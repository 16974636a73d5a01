"""AC: list_invoices pages are 1-based and complete (mode 'pages'); bad parameters raise ValueError (mode 'params')."""

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
    import datetime as dt

    from invoices.access import User
    from invoices.models import Invoice, LineItem
    from invoices.service import InvoiceService
    from invoices.store import JsonStore

    day = dt.date(2024, 3, 1)
    data = {"next_id": 1, "invoices": {}}
    for n in range(48):
        tenant = "tenant-a" if n < 45 else "tenant-b"
        inv = Invoice(
            tenant_id=tenant,
            customer=f"C{n}",
            currency="EUR",
            issue_date=day,
            due_date=day,
            lines=[LineItem("x", 1, 1)],
            id=data["next_id"],
        )
        data["invoices"][str(inv.id)] = inv.to_dict()
        data["next_id"] += 1
    user = User("u1", "tenant-a", "owner")
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonStore(os.path.join(tmp, "invoices.json"))
        store.save(data)
        service = InvoiceService(store)
        if MODE == "params":
            for kwargs in ({"page": 0}, {"page": -1}, {"per_page": 0}, {"per_page": 101}):
                try:
                    service.list_invoices(user, **kwargs)
                except ValueError:
                    continue
                fail(f"list_invoices({kwargs}) did not raise ValueError")
            check(
                len(service.list_invoices(user, page=1, per_page=100)["items"]) == 45,
                "per_page=100 must work",
            )
            return
        for per_page in (20, 15, 45, 50):
            seen, page = [], 1
            while page is not None and len(seen) <= 60:
                result = service.list_invoices(user, page=page, per_page=per_page)
                check(result["total"] == 45, f"total is {result['total']}, expected 45")
                check(len(result["items"]) <= per_page, "page larger than per_page")
                seen.extend(inv.id for inv in result["items"])
                page = result["next_page"]
                check(page is None or result["items"], f"next_page {page} after an empty page")
            check(
                seen == list(range(1, 46)),
                f"per_page={per_page}: pages returned ids {seen[:3]}...{seen[-3:]} (n={len(seen)}), expected 1..45",
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
