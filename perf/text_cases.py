"""Text-only cases: the harness's overhead per case against a chat endpoint that answers at once.

    python perf/text_cases.py [--rounds 5] [--tree PATH]

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
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def run_bench(tree: Path, launch: Path, home: Path) -> tuple[float, float]:
    """The wall time of one `bench run` and the CPU time (user + system) it and its children
    used: on a shared, loaded machine the CPU time varies far less than the wall time."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "PYTHONPATH": str(tree),
        "BENCH_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    argv = [
        sys.executable,
        "-c",
        "import sys; from bench_pipeline.cli.main import main; sys.exit(main(sys.argv[1:]))",
        "run",
        str(launch),
        "--quiet",
        "--json",
        "--fail-on-error",
    ]
    home.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # From a neutral folder: `python -c` puts the working directory first on sys.path.
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=home)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
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
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    sizes = tuple(args.sizes)
    server = InstantChat()
    wall: dict[tuple[Path, int], list[float]] = {(t, n): [] for t in trees for n in sizes}
    net: dict[tuple[Path, int], list[float]] = {(t, n): [] for t in trees for n in sizes}
    cpu: dict[tuple[Path, int], list[float]] = {(t, n): [] for t in trees for n in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-text-") as tmp:
        tmpdir = Path(tmp)
        launches = {n: write_factory(tmpdir / f"factory-{n}", server.url, n) for n in sizes}
        homes = {t: tmpdir / f"home-{i}" for i, t in enumerate(trees)}
        for t in trees:  # warm-up, uncounted (creates the instance, caches the bytecode)
            run_bench(t, launches[sizes[0]], homes[t])
        server.take()
        plan = [(t, n) for t in trees for n in sizes]
        for r in range(args.rounds):
            for t, n in plan if r % 2 == 0 else reversed(plan):
                elapsed, used = run_bench(t, launches[n], homes[t])
                requests, busy = server.take()
                if requests != n:
                    raise SystemExit(f"{n} cases made {requests} chat requests")
                wall[t, n].append(elapsed)
                net[t, n].append(elapsed - busy)
                cpu[t, n].append(used)
                print(
                    f"round {r + 1}: {t} N={n} wall {elapsed:.3f} s, cpu {used:.3f} s, "
                    f"server {busy:.4f} s",
                    file=sys.stderr,
                )
    small, large = sizes
    print(
        f"promptfoo's bar: {BAR} s per case; per-case cost = the same-round slope between "
        f"N = {small} and N = {large}, median of {args.rounds} rounds [lowest..highest]"
    )
    slopes: dict[Path, tuple[list[float], list[float]]] = {}
    for t in trees:
        per_case, fixed = _fit(net[t, small], net[t, large], small, large)
        cpu_case, cpu_fixed = _fit(cpu[t, small], cpu[t, large], small, large)
        slopes[t] = (
            _slopes(net[t, small], net[t, large], small, large),
            _slopes(cpu[t, small], cpu[t, large], small, large),
        )
        print(f"tree: {t}  rounds: {args.rounds}  (medians)")
        for n in sizes:
            print(
                f"  N={n:4d}: bench run {statistics.median(wall[t, n]):7.3f} s; "
                f"(wall - server) / N = {statistics.median(net[t, n]) / n:.4f} s per case; "
                f"cpu {statistics.median(cpu[t, n]):7.3f} s"
            )
        print(f"  fit over N = {small}, {large}: fixed {fixed:.3f} s + {per_case:.4f} s per case")
        print(f"  cpu fit: fixed {cpu_fixed:.3f} s + {cpu_case:.4f} s per case")
        # The fastest run of each size: on a loaded machine the noise only ever adds time
        fast = (min(net[t, large]) - min(net[t, small])) / (large - small)
        fast_cpu = (min(cpu[t, large]) - min(cpu[t, small])) / (large - small)
        print(f"  between the fastest runs: wall {fast:.4f} s, cpu {fast_cpu:.4f} s per case")
        print(f"  {_verdict(*slopes[t])}")
    if len(trees) > 1:
        first = trees[0]
        for t in trees[1:]:
            walls = [b - a for a, b in zip(slopes[first][0], slopes[t][0], strict=True)]
            cpus = [b - a for a, b in zip(slopes[first][1], slopes[t][1], strict=True)]
            print(
                f"{t} minus {first}, same round: wall {_spread(walls)}, cpu {_spread(cpus)} "
                "s per case"
            )


def _slopes(at_small: list[float], at_large: list[float], small: int, large: int) -> list[float]:
    return [(b - a) / (large - small) for a, b in zip(at_small, at_large, strict=True)]


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):+.4f} [{min(values):+.4f}..{max(values):+.4f}]"


def _verdict(wall_slopes: list[float], cpu_slopes: list[float]) -> str:
    """Held only when both medians are at or under the bar; said so only with every round's
    slope under it too, since one round's slope moves by milliseconds on a loaded machine."""
    worst = max(statistics.median(wall_slopes), statistics.median(cpu_slopes))
    if max(wall_slopes + cpu_slopes) <= BAR:
        word = "holds in every round"
    elif worst <= BAR:
        word = "holds at the median, not in every round"
    else:
        word = "misses"
    return (
        f"promptfoo's bar {BAR} s per case: wall {_spread(wall_slopes)} "
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
