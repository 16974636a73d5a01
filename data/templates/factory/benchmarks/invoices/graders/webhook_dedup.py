"""AC: WebhookReceiver processes each event id once (mode 'dedup'); a delivery whose handler failed is processed on retry (mode 'retry')."""

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
    import json

    from invoices.webhooks import SIGNATURE_HEADER, WebhookReceiver, sign

    secret = b"whsec_test_7f3a"
    receiver = WebhookReceiver(secret)

    def deliver(event):
        body = json.dumps(event).encode()
        return receiver.receive({SIGNATURE_HEADER: sign(secret, body)}, body)

    handled = []
    if MODE == "retry":
        attempts = []

        def flaky(event):
            attempts.append(event["id"])
            if len(attempts) == 1:
                raise RuntimeError("database unavailable")
            handled.append(event["id"])

        receiver.on("invoice.paid", flaky)
        try:
            deliver({"id": "evt_9", "type": "invoice.paid"})
        except RuntimeError:
            pass
        result = deliver({"id": "evt_9", "type": "invoice.paid"})
        check(
            handled == ["evt_9"],
            f"a retried delivery after a handler failure was not processed: {result}",
        )
        return
    receiver.on("invoice.paid", lambda event: handled.append(event["id"]))
    first = deliver({"id": "evt_1", "type": "invoice.paid"})
    check(first.get("status") == "processed", f"first delivery returned {first}")
    second = deliver({"id": "evt_1", "type": "invoice.paid"})
    check(handled == ["evt_1"], f"event evt_1 handled {handled.count('evt_1')} times")
    check(second.get("status") == "duplicate", f"a duplicate delivery returned {second}")
    third = deliver({"id": "evt_2", "type": "invoice.paid"})
    check(
        third.get("status") == "processed" and handled == ["evt_1", "evt_2"],
        "a new event id was not processed",
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
