"""AC: admins read only their own tenant's invoices; support reads all."""

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

    from invoices.access import PermissionDenied, User, can_read, visible_invoices
    from invoices.models import Invoice
    from invoices.service import InvoiceService
    from invoices.store import JsonStore

    def invoice(tenant):
        day = dt.date(2024, 3, 1)
        return Invoice(
            tenant_id=tenant, customer="ACME", currency="EUR", issue_date=day, due_date=day
        )

    inv_a, inv_b = invoice("tenant-a"), invoice("tenant-b")
    admin_a = User("u1", "tenant-a", "admin")
    viewer_a = User("u2", "tenant-a", "viewer")
    support = User("s1", "internal", "support")
    check(not can_read(admin_a, inv_b), "an admin of tenant-a can read tenant-b invoices")
    check(can_read(admin_a, inv_a), "an admin must read their own tenant's invoices")
    check(can_read(viewer_a, inv_a) and not can_read(viewer_a, inv_b), "viewer access changed")
    check(can_read(support, inv_a) and can_read(support, inv_b), "support must read every tenant")
    check(
        visible_invoices(admin_a, [inv_a, inv_b]) == [inv_a], "visible_invoices leaks other tenants"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonStore(os.path.join(tmp, "invoices.json"))
        stored_b = store.add(invoice("tenant-b"))
        try:
            InvoiceService(store).get_invoice(admin_a, stored_b.id)
        except PermissionDenied:
            pass
        else:
            fail("InvoiceService.get_invoice returned another tenant's invoice to an admin")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
