"""Bounded evidence: the patch, logs, the transcript and any file in a trial folder are capped.

Caps are bytes, read from the harness's environment (positive integers) with these defaults:

    BENCH_MAX_PATCH_BYTES          changes.patch                           10 MB
    BENCH_MAX_OUTPUT_BYTES         one command's captured output (a log)    1 MB
    BENCH_MAX_TRANSCRIPT_BYTES     transcript.jsonl                         20 MB
    BENCH_MAX_EVIDENCE_FILE_BYTES  any other file left in the trial folder  20 MB

A capped item is recorded with its full size and `truncated: true` in the trial's metadata.json
(`evidence`), and the trial row's `evidence_truncated` says that something was cut. The patch is
streamed from git: however large the diff, the harness holds at most the cap in memory.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_pipeline.formats.git import GIT_ENV
from bench_pipeline.workspace.process import MAX_OUTPUT_BYTES, evidence_cap
from bench_pipeline.workspace.repo import (
    ISOLATED_GIT_ENV,
    WorkspaceError,
    add_all,
    workspace_git_argv,
)

MAX_PATCH_BYTES = 10_000_000
MAX_TRANSCRIPT_BYTES = 20_000_000
MAX_EVIDENCE_FILE_BYTES = 20_000_000
CHUNK = 1 << 16


def caps() -> dict[str, int]:
    """The caps in force (recorded with each trial, so a reader knows what 'truncated' means)."""
    return {
        "patch_bytes": evidence_cap("BENCH_MAX_PATCH_BYTES", MAX_PATCH_BYTES),
        "output_bytes": evidence_cap("BENCH_MAX_OUTPUT_BYTES", MAX_OUTPUT_BYTES),
        "transcript_bytes": evidence_cap("BENCH_MAX_TRANSCRIPT_BYTES", MAX_TRANSCRIPT_BYTES),
        "file_bytes": evidence_cap("BENCH_MAX_EVIDENCE_FILE_BYTES", MAX_EVIDENCE_FILE_BYTES),
    }


def write_patch(
    workspace: Path,
    sha: str,
    dest: Path,
    cap: int,
    redact: Callable[[str], str],
    *,
    staged: bool = False,
) -> dict[str, Any]:
    """Write the workspace's diff against `sha` (new files included, binary-safe) to `dest`,
    at most `cap` bytes of it; returns {bytes, full_bytes, truncated}. `staged`: the state
    `repo.stage_workspace` indexed (what was graded last), not the files as they are now."""
    if not staged:
        add_all(workspace)
    diff = ["diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", sha]
    argv = workspace_git_argv(workspace, diff)
    kept = bytearray()
    total = 0
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **GIT_ENV, **ISOLATED_GIT_ENV},
        )
    except OSError as exc:
        raise WorkspaceError(f"cannot run git diff: {exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    while chunk := proc.stdout.read(CHUNK):
        total += len(chunk)
        if len(kept) < cap:
            kept += chunk[: cap - len(kept)]
    err = proc.stderr.read(CHUNK)
    if proc.wait() != 0:
        raise WorkspaceError(f"git diff failed: {err.decode(errors='replace').strip()[-500:]}")
    truncated = total > len(kept)
    text = kept.decode("utf-8", errors="replace")
    if truncated:
        # Cut at a line end so a secret split by the cap cannot survive as a partial value.
        text = text[: text.rfind("\n") + 1]
        text += f"[changes.patch truncated: {total} bytes in all, cap {cap}]\n"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(redact(text), encoding="utf-8")
    return {"bytes": dest.stat().st_size, "full_bytes": total, "truncated": truncated}


def cap_files(folder: Path, cap: int, skip: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Cut every file under `folder` larger than `cap` (e.g. what a `process`-mode agent wrote
    into the evidence folder) to `cap` bytes; returns {relative path: {bytes, full_bytes}}."""
    cut: dict[str, dict[str, Any]] = {}
    # scandir's entries carry their type and size: no Path objects, no stat call per file
    # (every trial runs this on its whole folder).
    pending = [(str(folder), "")]
    while pending:
        path, prefix = pending.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, rel + "/"))
                    continue
                if rel in skip or not entry.is_file(follow_symlinks=False):
                    continue  # symlinks (an agent's link out of the folder) are not followed
                size = entry.stat(follow_symlinks=False).st_size
                if size > cap:
                    os.truncate(entry.path, cap)
                    cut[rel] = {"bytes": cap, "full_bytes": size, "truncated": True}
            except OSError:
                continue
    return cut
