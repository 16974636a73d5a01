"""Factory files `bench validate` let through (or answered with a traceback, a wrong hint or a
hang) that a run then crashed on: each is now one line naming the file and the field, exit 2."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench

TASK = "benchmarks/invoices/tasks/amount-precision.yaml"
DEMO = "launches/demo.yaml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _set_prompt(factory: Path, value: str) -> None:
    text = (factory / TASK).read_text()
    start, end = text.index("prompt: |"), text.index("tags:")
    (factory / TASK).write_text(text[:start] + f"prompt: {value}\n" + text[end:])


def _refused(home: Path, *args: str) -> str:
    """`bench validate ARGS` refuses with exactly one line and writes nothing; the line
    without its `error: `."""
    code, out, err = run_bench("validate", *args, home=home)
    assert code == 2, (out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    warehouse = home / "warehouse"
    assert not warehouse.exists() or not list(warehouse.rglob("*.parquet"))
    return lines[0].removeprefix("error: ")


# --------------------------------------------------------------------------- 1. prompt


@pytest.mark.parametrize(
    "value, expected",
    [
        ('""', "prompt: is empty; write what the agent should do"),
        ('"  "', "prompt: is empty"),
        ("42", "prompt: expected text, got a number"),
    ],
    ids=["empty", "blank", "number"],
)
def test_an_empty_or_non_text_prompt_is_refused_naming_the_field(
    factory: Path, bench_home: Path, value: str, expected: str
) -> None:
    # (an empty prompt was `error: tuple index out of range`; `prompt: 42` was accepted)
    _set_prompt(factory, value)
    line = _refused(bench_home, str(factory))
    assert line.startswith(f"{TASK}: "), line
    assert expected in line, line


# --------------------------------------------------------------------------- 2. integers


@pytest.mark.parametrize(
    "tokens", [str(10**26), str(2**63), "1.0e+19"], ids=["1e26", "2**63", "float-1e19"]
)
def test_a_token_count_beyond_int64_is_refused_at_validate(
    factory: Path, bench_home: Path, tokens: str
) -> None:
    # (validate passed it and the run crashed writing it as an int64)
    _edit(factory / TASK, "input_tokens: 41230", f"input_tokens: {tokens}")
    line = _refused(bench_home, str(factory))
    assert line.startswith(f"{TASK}: original.input_tokens: "), line
    assert "is out of range" in line, line
    assert "between 0 and 9223372036854775807" in line, line


# --------------------------------------------------------------------------- 3. id length


def _long_config_id(factory: Path) -> str:
    _edit(factory / DEMO, "{id: noop, agent: noop}", "{id: " + "c" * 5000 + ", agent: noop}")
    return f"{DEMO}: configs[2].id: is 5,000 characters; an id has at most 100"


def _long_task_id(factory: Path) -> str:
    _edit(factory / TASK, "id: amount-precision\n", "id: " + "t" * 250 + "\n")
    return f"{TASK}: id: is 250 characters; an id has at most 100"


def _long_check_id(factory: Path) -> str:
    _edit(factory / TASK, "  - id: AC-1\n", "  - id: " + "k" * 250 + "\n")
    return f"{TASK}: checks[0].id: is 250 characters; an id has at most 100"


def _long_agent_name(factory: Path) -> str:
    _edit(factory / DEMO, "{id: noop, agent: noop}", "{id: noop, agent: " + "a" * 5000 + "}")
    return f"{DEMO}: configs[2].agent: is 5,000 characters; an agent name has at most 100"


LONG_IDS = [_long_config_id, _long_task_id, _long_check_id, _long_agent_name]


@pytest.mark.parametrize("case", LONG_IDS, ids=[c.__name__[1:] for c in LONG_IDS])
def test_an_id_too_long_for_a_file_name_is_refused(factory: Path, bench_home: Path, case) -> None:
    # (ids become path components: validate passed them, or died on `File name too long`)
    expected = case(factory)
    assert expected in _refused(bench_home, str(factory / DEMO))


# --------------------------------------------------------------------------- 4. agent: paths


@pytest.mark.parametrize(
    "agent, expected",
    [
        ("../../evil", "'../../evil' escapes the factory"),
        ("{outside}", "is an absolute path"),
        ("../prices", "'../prices' is a path"),
    ],
    ids=["dotdot", "absolute", "prices"],
)
def test_a_config_agent_that_is_a_path_is_refused(
    factory: Path, bench_home: Path, tmp_path: Path, agent: str, expected: str
) -> None:
    # A valid agent file outside the factory: it was read and run as the config's agent.
    (factory.parent / "evil.yaml").write_text("kind: noop\n")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "evil.yaml").write_text("kind: noop\n")
    agent = agent.format(outside=tmp_path / "x" / "evil")
    _edit(factory / DEMO, "{id: noop, agent: noop}", f"{{id: noop, agent: '{agent}'}}")
    line = _refused(bench_home, str(factory))
    assert line.startswith(f"{DEMO}: configs[2].agent: "), line
    assert expected in line and "name an agent by its file in agents/" in line, line


# --------------------------------------------------------------------------- 5. `..` inside


@pytest.mark.parametrize(
    "cwd, target",
    [
        (".", "launches/../launches/demo.yaml"),
        ("../sibling", "../factory/launches/demo.yaml"),
        ("benchmarks", ".."),
    ],
    ids=["launch-via-dotdot", "from-a-sibling-folder", "factory-as-dotdot"],
)
def test_a_path_with_dotdot_that_stays_in_the_factory_validates(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch, cwd: str, target: str
) -> None:
    # (the factory root kept its `..`, so every file below it "escaped the factory")
    where = factory / cwd
    where.mkdir(exist_ok=True)
    monkeypatch.chdir(where)
    code, out, err = run_bench("validate", target, home=bench_home)
    assert code == 0, (out, err)
    assert "ok  launch demo:" in out and "ok  suite invoices: 14 tasks" in out, out


# --------------------------------------------------------------------------- 6. not a file


def _agent_folder(factory: Path) -> str:
    (factory / "agents/noop.yaml").unlink()
    (factory / "agents/noop.yaml").mkdir()
    return "agents/noop.yaml: is a folder, not a file"


def _agent_dangling_symlink(factory: Path) -> str:
    (factory / "agents/noop.yaml").unlink()
    os.symlink("gone.yaml", factory / "agents/noop.yaml")
    return "agents/noop.yaml: is a symlink to a missing file"


def _agent_symlink_loop(factory: Path) -> str:
    (factory / "agents/noop.yaml").unlink()
    os.symlink("noop.yaml", factory / "agents/noop.yaml")
    return "agents/noop.yaml: is a symlink loop"


def _suite_folder(factory: Path) -> str:
    (factory / "benchmarks/invoices/suite.yaml").unlink()
    (factory / "benchmarks/invoices/suite.yaml").mkdir()
    return "benchmarks/invoices/suite.yaml: is a folder, not a file"


def _suite_dangling_symlink(factory: Path) -> str:
    (factory / "benchmarks/invoices/suite.yaml").unlink()
    os.symlink("gone.yaml", factory / "benchmarks/invoices/suite.yaml")
    return "benchmarks/invoices/suite.yaml: is a symlink to a missing file"


def _system_prompt_folder(factory: Path) -> str:
    _edit(
        factory / "agents/coder.yaml",
        "system_prompt: ../prompts/coder.md",
        "system_prompt: ../prompts",
    )
    return "agents/coder.yaml: system_prompt: '../prompts' is a folder, not a file"


NOT_FILES = [
    _agent_folder,
    _agent_dangling_symlink,
    _agent_symlink_loop,
    _suite_folder,
    _suite_dangling_symlink,
    _system_prompt_folder,
]


@pytest.mark.parametrize("case", NOT_FILES, ids=[c.__name__[1:] for c in NOT_FILES])
def test_a_folder_or_broken_symlink_in_place_of_a_file_says_what_it_is(
    factory: Path, bench_home: Path, case
) -> None:
    # (it said "no agent named 'noop'; did you mean 'noop'?", or that the folder does not exist)
    expected = case(factory)
    line = _refused(bench_home, str(factory))
    assert line.startswith(expected), line
    assert "did you mean" not in line and "does not exist" not in line, line


# --------------------------------------------------------------------------- 7. FIFO


class _Hung(Exception):
    pass


def test_a_fifo_in_place_of_a_task_file_is_refused_without_blocking(
    factory: Path, bench_home: Path
) -> None:
    task = factory / TASK
    task.unlink()
    os.mkfifo(task)

    # Opening a FIFO to read waits for a writer that never comes: an alarm interrupts that
    # wait (the old loader's), so this test fails instead of hanging.
    def interrupt(signum: int, frame: object) -> None:
        raise _Hung("bench validate blocked on the FIFO")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 20)
    try:
        line = _refused(bench_home, str(factory))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert line == f"{TASK}: is a FIFO, not a regular file; replace it with a regular file", line


# --------------------------------------------------------------------------- 8. url


@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1/v1", "http://", "127.0.0.1:8765"])
def test_an_http_chat_url_that_is_not_an_http_url_is_refused(
    factory: Path, bench_home: Path, url: str
) -> None:
    # (validate passed it; the run then retried it for minutes)
    _edit(factory / "agents/support-bot.yaml", "url: http://127.0.0.1:8765/v1", f"url: '{url}'")
    line = _refused(bench_home, str(factory))
    assert line == (
        f"agents/support-bot.yaml: url: '{url}' is not an http(s) URL; "
        "give one such as https://host/v1"
    ), line


def test_a_config_url_override_that_is_not_an_http_url_is_refused(
    factory: Path, bench_home: Path
) -> None:
    _edit(
        factory / "launches/support.yaml",
        "{id: support-bot, agent: support-bot}",
        "{id: support-bot, agent: support-bot, url: 'localhost v1'}",
    )
    line = _refused(bench_home, str(factory))
    assert line.startswith("launches/support.yaml: configs[0].url: 'localhost v1' is not"), line
