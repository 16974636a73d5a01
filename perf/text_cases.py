"""Text-only cases: the harness's overhead per case against a chat endpoint that answers at once.

    python perf/text_cases.py [--rounds 5] [--tree PATH] [--serve]

promptfoo's figure is ~0.005 s per case on 200 cases with two string assertions each against
a fixed answer. Here: an OpenAI-compatible `POST /v1/chat/completions` server on 127.0.0.1 in
this process (a fixed answer with usage, no delay; its own time per request is measured and
subtracted), a factory of text tasks with one `contains` and one `not_contains` assertion
each, an `http-chat` agent, `scorers: [assert]`, and `bench run` in a fresh process. A suite
holds at most 100 tasks, so N cases are N/2 tasks × 2 repetitions (past 200, 100 tasks ×
N/100 repetitions: `--sizes 20 500` (a launch runs at most 500 trials) measures a slope 2.7 times less sensitive to the
~0.5 s the fixed cost moves by on a loaded machine, each extra repetition's partition
included). N = 20 and N = 200 are interleaved over the rounds; the per-case cost is the slope
between them and the fixed cost the intercept, beside the plain (bench wall - N × server
time) / N, and the slope between the fastest run of each size. The verdict line gives
each slope's median and its lowest..highest round, and says the bar holds only when the median
of both the wall and the CPU slope is under it (and whether every round's is). With several
`--tree`s, the last line is each tree's slope minus the first tree's, round by round.
`--serve` also times each tree's `bench run` handed to a warm `bench serve` on its own home,
in the same rounds: the same per-case work without the ~4 s of start-up (whose jitter is most
of an in-process slope's noise); its CPU time is the served command's (the server's reaped
child), trials included.

The floor: the endpoint is answered by Python's `http.server`, whose parsing of each request
(before the handler's clock starts) is endpoint time the busy count misses, ~0.4 ms a request
here. So each round also runs the plain loop any harness must at least do, in a fresh process
at both sizes: one kept-alive standard-library connection, the same request per case, the
answer's JSON parsed and both assertions checked. The harness's overhead per case is the bench
slope minus the floor's slope in the same round (wall and CPU: the floor's CPU is its client's,
as bench's is its own; the endpoint's is this process's in both), and the verdict is on that
(promptfoo's figure is its harness's time beyond the provider's); the raw slopes are printed
too.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from warm_server import (  # perf/ is sys.path[0]
    ENTRY,
    bench_env,
    children_cpu,
    measured,
    python_c,
    reaped_cpu,
    served_cpu,
    start_server,
)

ROOT = Path(__file__).resolve().parents[1]
BAR = 0.005  # promptfoo's harness overhead per case, seconds
ANSWER = "Refunds are accepted within 30 days of purchase; see Settings > Billing."
REPLY = json.dumps(
    {
        "id": "chatcmpl-perf",
        "object": "chat.completion",
        "model": "perf-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 16, "total_tokens": 36},
    }
).encode()


class InstantChat:
    """The endpoint: answers every chat request with REPLY and counts its own handling time."""

    def __init__(self) -> None:
        self.requests = 0
        self.busy_seconds = 0.0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client may reuse its connection
            # As a production server answers (uvicorn, nginx, Go's net/http): headers and body
            # in one send, Nagle off. http.server's default (two unbuffered sends, Nagle on)
            # stalls every reply on a reused connection by the peer's 40 ms delayed ACK.
            disable_nagle_algorithm = True
            wbufsize = -1

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                start = time.perf_counter()
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(REPLY)))
                self.end_headers()
                self.wfile.write(REPLY)
                with owner._lock:
                    owner.requests += 1
                    owner.busy_seconds += time.perf_counter() - start

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self) -> tuple[int, float]:
        with self._lock:
            out = (self.requests, self.busy_seconds)
            self.requests, self.busy_seconds = 0, 0.0
        return out


def shape(cases: int) -> tuple[int, int]:
    """(tasks, repetitions) for `cases` cases: 2 repetitions up to 200 cases (a suite holds at
    most 100 tasks), more repetitions of 100 tasks beyond (each one more partition)."""
    tasks = min(100, cases // 2)
    if cases < 2 or cases % 2 or cases % tasks:
        raise SystemExit(f"--sizes: {cases} cases is not 2 x up to 100 tasks or k x 100 tasks")
    return tasks, cases // tasks


def write_factory(root: Path, url: str, cases: int) -> Path:
    """A factory of text tasks (two string assertions each) for `cases` cases; the launch."""
    tasks, repetitions = shape(cases)
    (root / "agents").mkdir(parents=True)
    (root / "launches").mkdir()
    tasks_dir = root / "benchmarks" / "text" / "tasks"
    tasks_dir.mkdir(parents=True)
    (root / "prices.yaml").write_text("perf-model: {input: 1.0, output: 5.0}\n")
    (root / "agents" / "bot.yaml").write_text(
        f"kind: http-chat\nmodel: perf-model\nurl: {url}\ntimeout_seconds: 60\n"
    )
    (root / "benchmarks" / "text" / "suite.yaml").write_text(
        "title: Text cases\nagent: bot\ndefaults: {timeout_seconds: 60}\n"
    )
    for i in range(tasks):
        (tasks_dir / f"case-{i:03d}.yaml").write_text(
            f"id: case-{i:03d}\n"
            f"prompt: Case {i}. How long do customers have to ask for a refund?\n"
            "assert:\n"
            '  - {type: contains, value: "30 days"}\n'
            '  - {type: not_contains, value: "sk_live_"}\n'
        )
    launch = root / "launches" / "text.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: text\nconfigs:\n  - {id: bot, agent: bot}\n"
        f"repetitions: {repetitions}\nscorers: [assert]\nmax_parallel: 1\n"
    )
    return launch


Variant = tuple[Path, bool]  # (checkout, handed to its `bench serve`)


def _name(variant: Variant) -> str:
    return f"{variant[0]} (served)" if variant[1] else str(variant[0])


# The floor's client: standard library only, as little as a harness can do per case.
FLOOR_CLIENT = r"""
import http.client, json, sys
from urllib.parse import urlsplit
url, cases = urlsplit(sys.argv[1]), int(sys.argv[2])
conn = http.client.HTTPConnection(url.hostname, url.port)
passed = 0
for i in range(cases):
    question = f"Case {i}. How long do customers have to ask for a refund?"
    body = {"model": "perf-model", "messages": [{"role": "user", "content": question}]}
    conn.request("POST", url.path + "/chat/completions", body=json.dumps(body).encode(),
                 headers={"content-type": "application/json"})
    answer = json.loads(conn.getresponse().read())["choices"][0]["message"]["content"]
    passed += "30 days" in answer and "sk_live_" not in answer
sys.exit(0 if passed == cases else f"floor: {cases - passed} of {cases} cases failed")
"""


def _timed_run(argv: list[str], **kwargs: Any) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run `argv` to its end: (wall seconds, the CPU seconds it and its reaped children used,
    the completed process)."""
    done: list[subprocess.CompletedProcess] = []

    def run() -> float:
        start = time.perf_counter()
        done.append(subprocess.run(argv, capture_output=True, text=True, **kwargs))
        return time.perf_counter() - start

    elapsed, cpu = measured(run, children_cpu)
    return elapsed, cpu, done[0]


def run_floor(url: str, cases: int) -> tuple[float, float]:
    """The wall and CPU time (its own) of the floor's client doing `cases` cases."""
    elapsed, cpu, proc = _timed_run([sys.executable, "-I", "-c", FLOOR_CLIENT, url, str(cases)])
    if proc.returncode != 0:
        raise SystemExit(f"the floor's client exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, cpu


def run_bench(
    tree: Path, launch: Path, home: Path, server: subprocess.Popen[bytes] | None = None
) -> tuple[float, float]:
    """The wall time of one `bench run` and the CPU time (user + system) it and its children
    used: on a shared, loaded machine the CPU time varies far less than the wall time. With
    `server` (a `bench serve` on `home`), the command is handed to it."""
    env = bench_env(home, tree)
    argv = [
        *python_c(ENTRY),
        "run",
        str(launch),
        "--quiet",
        "--json",
        "--fail-on-error",
    ]
    home.mkdir(parents=True, exist_ok=True)
    served_before = reaped_cpu(server.pid) if server is not None else 0.0
    # From a neutral folder: `python -c` puts the working directory first on sys.path.
    elapsed, cpu, proc = _timed_run(argv, env=env, cwd=home)
    if server is not None:  # the command ran in the server's child, not in the `bench` process
        cpu += served_cpu(server.pid, served_before)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv[3:])} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    table = json.loads(proc.stdout)["config_table"][0]
    if table.get("overall") != 1.0:
        raise SystemExit(f"the cases did not all pass: {table}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="a checkout to measure (repeat to compare checkouts in the same rounds; "
        "default: this one)",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs=2,
        default=(20, 200),
        help="the two case counts (even; past 200, a multiple of 100)",
    )
    parser.add_argument(
        "--serve", action="store_true", help="hand every `bench run` to a warm `bench serve`"
    )
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    sizes = tuple(args.sizes)
    # What is measured: each tree in its own process, and with --serve the same tree handed to
    # its warm server, interleaved in the same rounds (a per-case figure moves with the load).
    variants = [
        (t, served) for t in trees for served in ((False, True) if args.serve else (False,))
    ]
    server = InstantChat()
    wall: dict[tuple[Variant, int], list[float]] = {(v, n): [] for v in variants for n in sizes}
    net: dict[tuple[Variant, int], list[float]] = {(v, n): [] for v in variants for n in sizes}
    cpu: dict[tuple[Variant, int], list[float]] = {(v, n): [] for v in variants for n in sizes}
    floor_net: dict[int, list[float]] = {n: [] for n in sizes}  # the floor's (wall - server)
    floor_cpu: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-text-") as tmp:
        tmpdir = Path(tmp)
        launches = {n: write_factory(tmpdir / f"factory-{n}", server.url, n) for n in sizes}
        homes = {v: tmpdir / f"home-{i}" for i, v in enumerate(variants)}
        servers: dict[Variant, subprocess.Popen[bytes]] = {}
        for v in variants:
            if v[1]:
                homes[v].mkdir(parents=True)
                argv = [*python_c(ENTRY), "serve"]
                servers[v] = start_server(argv, homes[v], bench_env(homes[v], v[0]))
                atexit.register(servers[v].terminate)  # on an error too; stops on SIGTERM
        for v in variants:  # warm-up, uncounted (creates the instance, caches the bytecode)
            run_bench(v[0], launches[sizes[0]], homes[v], servers.get(v))
        run_floor(server.url, sizes[0])  # (warms the page cache of the standard library)
        server.take()
        plan: list[tuple[Variant | None, int]] = [
            (v, n) for v in [None, *variants] for n in sizes
        ]  # None: the floor
        for r in range(args.rounds):
            for v, n in plan if r % 2 == 0 else reversed(plan):
                if v is None:
                    elapsed, used = run_floor(server.url, n)
                else:
                    elapsed, used = run_bench(v[0], launches[n], homes[v], servers.get(v))
                requests, busy = server.take()
                if requests != n:
                    raise SystemExit(f"{n} cases made {requests} chat requests")
                (floor_net[n] if v is None else net[v, n]).append(elapsed - busy)
                (floor_cpu[n] if v is None else cpu[v, n]).append(used)
                if v is not None:
                    wall[v, n].append(elapsed)
                print(
                    f"round {r + 1}: {'floor' if v is None else _name(v)} N={n} "
                    f"wall {elapsed:.3f} s, cpu {used:.3f} s, server {busy:.4f} s",
                    file=sys.stderr,
                )
        for warm in servers.values():  # before their homes go
            warm.terminate()
            warm.wait(timeout=60)
    small, large = sizes
    print(
        f"promptfoo's bar: {BAR} s per case; per-case cost = the same-round slope between "
        f"N = {small} and N = {large}, median of {args.rounds} rounds [lowest..highest]; "
        "overhead = that slope minus the floor's, same round"
    )
    floor_wall = _slopes(floor_net[small], floor_net[large], small, large)
    floor_used = _slopes(floor_cpu[small], floor_cpu[large], small, large)
    print(
        f"floor (a plain keep-alive client, same requests and assertions): "
        f"(wall - server) {_spread(floor_wall)} s per case, cpu {_spread(floor_used)} s per case"
        f"; medians (wall - server): "
        + ", ".join(f"N={n} {statistics.median(floor_net[n]):.3f} s" for n in sizes)
    )
    slopes: dict[Variant, tuple[list[float], list[float]]] = {}
    for v in variants:
        per_case, fixed = _fit(net[v, small], net[v, large], small, large)
        cpu_case, cpu_fixed = _fit(cpu[v, small], cpu[v, large], small, large)
        slopes[v] = (
            _minus(_slopes(net[v, small], net[v, large], small, large), floor_wall),
            _minus(_slopes(cpu[v, small], cpu[v, large], small, large), floor_used),
        )
        print(f"tree: {_name(v)}  rounds: {args.rounds}  (medians)")
        for n in sizes:
            print(
                f"  N={n:4d}: bench run {statistics.median(wall[v, n]):7.3f} s; "
                f"(wall - server) / N = {statistics.median(net[v, n]) / n:.4f} s per case; "
                f"cpu {statistics.median(cpu[v, n]):7.3f} s"
            )
        print(f"  fit over N = {small}, {large}: fixed {fixed:.3f} s + {per_case:.4f} s per case")
        print(f"  cpu fit: fixed {cpu_fixed:.3f} s + {cpu_case:.4f} s per case")
        # The fastest run of each size: on a loaded machine the noise only ever adds time
        fast = (min(net[v, large]) - min(net[v, small])) / (large - small)
        fast_cpu = (min(cpu[v, large]) - min(cpu[v, small])) / (large - small)
        print(f"  between the fastest runs: wall {fast:.4f} s, cpu {fast_cpu:.4f} s per case")
        print(
            f"  beyond the floor (overhead), same round: wall {_spread(slopes[v][0])}, "
            f"cpu {_spread(slopes[v][1])} s per case"
        )
        print(f"  {_verdict(*slopes[v])}")
    first = variants[0]
    for v in variants[1:]:
        walls = [b - a for a, b in zip(slopes[first][0], slopes[v][0], strict=True)]
        cpus = [b - a for a, b in zip(slopes[first][1], slopes[v][1], strict=True)]
        print(
            f"{_name(v)} minus {_name(first)}, same round: wall {_spread(walls)}, "
            f"cpu {_spread(cpus)} s per case"
        )


def _slopes(at_small: list[float], at_large: list[float], small: int, large: int) -> list[float]:
    return [(b - a) / (large - small) for a, b in zip(at_small, at_large, strict=True)]


def _minus(slopes: list[float], floor: list[float]) -> list[float]:
    """Each round's slope minus the floor's slope in that round."""
    return [s - f for s, f in zip(slopes, floor, strict=True)]


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):+.4f} [{min(values):+.4f}..{max(values):+.4f}]"


def _verdict(wall_slopes: list[float], cpu_slopes: list[float]) -> str:
    """On the overhead slopes (bench's minus the floor's). Held only when both medians are at
    or under the bar; said so only with every round's slope under it too, since one round's
    slope moves by milliseconds on a loaded machine."""
    worst = max(statistics.median(wall_slopes), statistics.median(cpu_slopes))
    if max(wall_slopes + cpu_slopes) <= BAR:
        word = "holds in every round"
    elif worst <= BAR:
        word = "holds at the median, not in every round"
    else:
        word = "misses"
    return (
        f"promptfoo's bar {BAR} s per case, overhead: wall {_spread(wall_slopes)} "
        f"({statistics.median(wall_slopes) / BAR:.2f}x), cpu {_spread(cpu_slopes)} "
        f"({statistics.median(cpu_slopes) / BAR:.2f}x) -> {word}"
    )


def _fit(
    at_small: list[float], at_large: list[float], small: int, large: int
) -> tuple[float, float]:
    """(per case, fixed): the median of the same-round slopes, and the median intercept."""
    slopes = [(b - a) / (large - small) for a, b in zip(at_small, at_large, strict=True)]
    per_case = statistics.median(slopes)
    fixed = statistics.median(
        [a - per_case * small for a in at_small] + [b - per_case * large for b in at_large]
    )
    return per_case, fixed


if __name__ == "__main__":
    main()
