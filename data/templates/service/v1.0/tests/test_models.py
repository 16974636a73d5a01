import unittest
from decimal import Decimal

from invoices.models import ValidationError, parse_amount, validate_invoice


class ModelTests(unittest.TestCase):
    def test_parse_amount(self):
        self.assertEqual(parse_amount("12.50"), Decimal("12.50"))
        with self.assertRaises(ValidationError):
            parse_amount("twelve")

    def test_total(self):
        invoice = validate_invoice(
            {
                "customer": "ACME",
                "issue_date": "2024-03-01",
                "lines": [{"description": "Support", "quantity": 2, "unit_price": "50"}],
                "tax_rate": "0.2",
            },
            tenant_id="t1",
        )
        self.assertEqual(invoice.total, Decimal("120.0"))
        self.assertEqual(str(invoice.due_date), "2024-03-31")


if __name__ == "__main__":
    unittest.main()
