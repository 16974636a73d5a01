"""AC: verify_signature checks HMAC-SHA256 over '<t>.<body>' (mode 'valid') within a timestamp tolerance (mode 'tolerance')."""

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
    import hashlib
    import hmac
    import secrets
    import time

    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append(1)
        return real(a, b)

    hmac.compare_digest = spy  # patched before import so `from hmac import compare_digest` sees it
    secrets.compare_digest = spy
    from invoices.webhooks import SignatureError, verify_signature

    secret = b"whsec_test_7f3a"
    body = b'{"id": "evt_1", "type": "invoice.paid", "data": {"invoice_id": 1, "amount": "10.00"}}'

    def header(t, payload=body, key=secret):
        digest = hmac.new(key, str(t).encode() + b"." + payload, hashlib.sha256).hexdigest()
        return f"t={t},v1={digest}"

    def refused(hdr, payload=body, **kwargs):
        try:
            verify_signature(secret, payload, hdr, **kwargs)
        except SignatureError:
            return True
        return False

    t0 = 1_700_000_000
    if MODE == "tolerance":
        verify_signature(secret, body, header(t0), now=t0 + 299)
        check(refused(header(t0), now=t0 + 301), "a signature 301 s old was accepted")
        check(refused(header(t0), now=t0 - 301), "a timestamp 301 s in the future was accepted")
        verify_signature(secret, body, header(t0), now=t0 + 500, tolerance=600)
        check(refused(header(t0), now=t0 + 61, tolerance=60), "the tolerance argument is ignored")
        now = int(time.time())
        verify_signature(secret, body, header(now - 10))
        check(refused(header(now - 1000)), "without `now`, the current time must be used")
        return
    verify_signature(secret, body, header(t0), now=t0)
    check(calls, "the signature is not compared with hmac.compare_digest")
    check(
        refused(header(t0), payload=body.replace(b"10.00", b"99.00"), now=t0),
        "a tampered body was accepted",
    )
    check(
        refused(header(t0, key=b"other"), now=t0),
        "a signature made with another secret was accepted",
    )
    old_style = f"t={t0},v1={hmac.new(secret, body, hashlib.sha256).hexdigest()}"
    check(refused(old_style, now=t0), "a signature that does not cover the timestamp was accepted")
    for bad in ("", "v1=abc", "t=x,v1=abc", f"t={t0}"):
        check(refused(bad, now=t0), f"malformed header {bad!r} was accepted")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
