"""Workspace-confined tools: confinement, edits, command runs."""

from __future__ import annotations

import time

import pytest

from bench_pipeline.agents.tools import MAX_TOOL_OUTPUT, Toolbox, truncate_middle
from bench_pipeline.workspace.process import scrubbed_env


@pytest.fixture
def box(tmp_path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("x = 1\ny = 1\n")
    (ws / ".git").mkdir()
    (tmp_path / "secret.txt").write_text("outside\n")
    (ws / "escape").symlink_to(tmp_path / "secret.txt")
    (ws / "escape_dir").symlink_to(tmp_path)
    return Toolbox(ws, scrubbed_env(), lambda: 30.0)


@pytest.mark.parametrize(
    "name,args",
    [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "escape"}),
        ("write_file", {"path": "escape", "content": "pwned"}),
        ("write_file", {"path": "escape_dir/secret.txt", "content": "pwned"}),
        ("write_file", {"path": "escape_dir/new.txt", "content": "pwned"}),
        ("write_file", {"path": "pkg/../../secret.txt", "content": "pwned"}),
        ("edit_file", {"path": "escape", "old_string": "outside", "new_string": "pwned"}),
        ("list_files", {"path": ".."}),
    ],
)
def test_escapes_refused_and_nothing_touched(box, tmp_path, name, args):
    args = dict(args)
    outcome = box.call(name, args)
    assert outcome.is_error and "outside the workspace" in outcome.text
    assert (tmp_path / "secret.txt").read_text() == "outside\n"
    assert not (tmp_path / "new.txt").exists()


def test_absolute_path_outside_refused_inside_allowed(box, tmp_path):
    assert box.call("read_file", {"path": str(tmp_path / "secret.txt")}).is_error
    inside = box.call("read_file", {"path": str(box.root / "pkg" / "mod.py")})
    assert not inside.is_error and inside.text == "x = 1\ny = 1\n"


def test_git_dir_is_not_writable(box):
    out = box.call("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh"})
    assert out.is_error and ".git" in out.text
    assert not (box.root / ".git" / "hooks").exists()


def test_edit_requires_unique_match(box):
    out = box.call("edit_file", {"path": "pkg/mod.py", "old_string": "= 1", "new_string": "= 2"})
    assert out.is_error and "2 times" in out.text
    out = box.call(
        "edit_file", {"path": "pkg/mod.py", "old_string": "y = 1", "new_string": "y = 2"}
    )
    assert not out.is_error
    assert (box.root / "pkg" / "mod.py").read_text() == "x = 1\ny = 2\n"
    assert box.call(
        "edit_file", {"path": "pkg/mod.py", "old_string": "zzz", "new_string": ""}
    ).is_error


def test_write_creates_dirs_and_list_skips_git(box):
    assert not box.call("write_file", {"path": "a/b/c.txt", "content": "hi"}).is_error
    listing = box.call("list_files", {}).text.splitlines()
    assert "a/b/c.txt" in listing and "pkg/mod.py" in listing
    assert not any(line.startswith(".git") for line in listing)


def test_run_command_output_and_no_shell(box):
    out = box.call("run_command", {"command": ["python", "-c", "print('a' * 30000)"]})
    assert out.text.startswith("[exit code 0]") and "characters omitted" in out.text
    assert len(out.text) < MAX_TOOL_OUTPUT + 200
    assert box.call("run_command", {"command": "ls -la"}).is_error
    out = box.call("run_command", {"command": ["echo", "$HOME", "|", "wc"]})
    assert "$HOME | wc" in out.text


def test_run_command_timeout_capped_by_trial_time(tmp_path):
    box = Toolbox(tmp_path, scrubbed_env(), lambda: 0.5)
    start = time.monotonic()
    out = box.call("run_command", {"command": ["sleep", "30"], "timeout_seconds": 300})
    assert time.monotonic() - start < 5
    assert out.is_error and "timeout" in out.text


def test_only_named_tools_offered(tmp_path):
    box = Toolbox(tmp_path, {}, lambda: 1.0, ("read_file",))
    assert [d["name"] for d in box.definitions()] == ["read_file"]
    assert box.call("write_file", {"path": "x", "content": ""}).is_error
    assert not (tmp_path / "x").exists()


def test_truncate_middle_keeps_head_and_tail():
    text = "HEAD" + "x" * 50_000 + "TAIL"
    out = truncate_middle(text, 100)
    assert out.startswith("HEAD") and out.endswith("TAIL")
