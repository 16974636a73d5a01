"""AC: RateLimiter.allow never admits more than the limit under concurrency."""

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
    import threading
    import time

    from invoices.ratelimit import RateLimiter

    def slow_clock():
        time.sleep(0.001)  # widens the window between reading and writing the counter
        return 1000.0

    for round_no in range(2):
        limiter = RateLimiter(limit=5, window_seconds=60, clock=slow_clock)
        barrier = threading.Barrier(10)
        results = []
        lock = threading.Lock()

        def worker(limiter=limiter, barrier=barrier, results=results, lock=lock):
            barrier.wait()
            for _ in range(2):
                allowed = limiter.allow("tenant-a")
                with lock:
                    results.append(allowed)

        threads = [threading.Thread(target=worker) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        check(len(results) == 20, "worker threads did not finish")
        check(
            results.count(True) == 5,
            f"round {round_no}: {results.count(True)} of 20 concurrent requests allowed, limit is 5",
        )
        check(limiter.allow("tenant-b"), "another key must have its own budget")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as exc:  # anything raised by the code under test = behaviour absent
        fail(f"{type(exc).__name__}: {exc}".splitlines()[0])
    print("PASS")
    sys.exit(0)
