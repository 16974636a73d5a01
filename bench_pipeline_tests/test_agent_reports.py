"""What a command agent reports about itself cannot break a run: a usage file whose cost is
`Infinity` made the whole run fail while its results were derived (the chart's NaN), and so did
`bench run --resume`; token counts past int64 and a lone surrogate in an event raised on the
harness's side."""

from __future__ import annotations

import json
from pathlib import Path

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.test_trial_isolation import _command_launch, _trials

BROKEN_REPORT = r"""
import os, pathlib, sys
sys.stdin.read()
pathlib.Path(os.environ["BENCH_USAGE_FILE"]).write_text(
    '{"cost_usd": Infinity, "input_tokens": 1e400, "output_tokens": ' + "9" * 400 + "}"
)
pathlib.Path(os.environ["BENCH_EVENTS_FILE"]).write_text(
    '{"event": "model_response", "text": "half a pair: \\ud800"}\n'
)
"""


def test_a_broken_usage_report_is_an_unknown_cost_and_the_run_goes_on(
    factory: Path, bench_home: Path
) -> None:
    launch = _command_launch(factory, "broken", BROKEN_REPORT, [], tasks=2)
    code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
    assert code == 0, err
    trials = _trials(bench_home)
    assert [t["outcome"] for t in trials] == ["succeeded", "succeeded"]
    for trial in trials:
        assert trial["cost_usd"] is None or trial["cost_usd"] != trial["cost_usd"]  # unknown
        assert "cost_usd Infinity is not a finite number >= 0" in trial["cost_unknown_reason"]
        assert trial["input_tokens"] is None or trial["input_tokens"] != trial["input_tokens"]
    (row,) = json.loads(out)["config_table"]
    assert row["cost_coverage"] == 0.0 and row["scored_checks"] == 2
    # the event is in the transcript, escaped: valid JSON on one line, valid UTF-8
    transcript = next((bench_home / "evidence").rglob("transcript.jsonl"))
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert any(e.get("text") == "half a pair: \ud800" for e in events)
    code, out, err = run_bench("results", "--json", home=bench_home)
    assert code == 0, err


def test_a_token_count_that_is_not_a_count_makes_the_cost_unknown(tmp_path: Path) -> None:
    """input_tokens: -1000 was dropped and the rest priced: a known cost, too low."""
    from bench_pipeline.agents.command import usage_from_file
    from bench_pipeline.formats.model import Prices

    usage_file = tmp_path / "usage.json"
    prices = Prices({"m": {"input": 3.0, "output": 15.0}})
    usage_file.write_text('{"input_tokens": -1000, "output_tokens": 10, "model": "m"}')
    usage = usage_from_file(usage_file, prices, None)
    assert usage is not None and usage.cost_usd is None
    assert "input_tokens -1000 is not a count" in (usage.cost_unknown_reason or "")
    usage_file.write_text('{"input_tokens": 1000, "output_tokens": 10, "model": "m"}')
    usage = usage_from_file(usage_file, prices, None)
    assert usage is not None and usage.cost_usd is not None and usage.cost_usd > 0
