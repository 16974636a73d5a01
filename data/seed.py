#!/usr/bin/env python3
"""Build the bench_pipeline example data: a small git repository and a factory.

    python data/seed.py [--out DIR]        (default: data/example next to this script)

Everything is copied from data/templates/ and committed with fixed author, committer
and dates, so two runs give byte-identical files and identical commit shas.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
DEFAULT_OUT = HERE / "example"
OUTPUT_ENTRIES = {"service-repo", "factory"}
SKIP_NAMES = {"__pycache__", ".DS_Store"}
SKIP_SUFFIXES = (".pyc", ".pyo")

IDENTITY = {
    "GIT_AUTHOR_NAME": "Invoices Team",
    "GIT_AUTHOR_EMAIL": "invoices-team@example.com",
    "GIT_COMMITTER_NAME": "Invoices Team",
    "GIT_COMMITTER_EMAIL": "invoices-team@example.com",
}

# (template overlay, commit message, date, tag)
SERVICE_HISTORY = [
    (
        "v1.0",
        "Invoices service 1.0: models, store, ledger, webhooks, limits, access",
        "2024-01-15T10:00:00+00:00",
        "v1.0",
    ),
    (
        "v1.1",
        "Apply invoice.paid webhooks to invoices; log webhook events",
        "2024-02-20T15:30:00+00:00",
        "v1.1",
    ),
]
FACTORY_COMMIT = ("Example factory: invoices and support suites", "2024-03-01T09:00:00+00:00")


def git_env(date: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(IDENTITY)
    env.update(
        {
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
            "GIT_CONFIG_GLOBAL": os.devnull,  # ignore the user's ~/.gitconfig (hooks, signing...)
            "GIT_CONFIG_NOSYSTEM": "1",
            "TZ": "UTC",
            "LC_ALL": "C",
        }
    )
    return env


def git(cwd: Path, *args: str, date: str = "2024-01-01T00:00:00+00:00") -> str:
    cmd = [
        "git",
        "-c",
        "init.defaultBranch=main",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "tag.gpgsign=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.fileMode=true",
        *args,
    ]
    proc = subprocess.run(cmd, cwd=cwd, env=git_env(date), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"seed: {' '.join(cmd)} failed in {cwd}:\n{proc.stderr.strip()}")
    return proc.stdout.strip()


def copy_tree(src: Path, dst: Path) -> int:
    """Copy regular files in sorted order, skipping caches; modes are normalised."""
    count = 0
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_NAMES)
        rel = Path(root).relative_to(src)
        for name in sorted(files):
            if name in SKIP_NAMES or name.endswith(SKIP_SUFFIXES):
                continue
            source = Path(root) / name
            target = dst / rel / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            os.chmod(
                target, 0o755 if os.access(source, os.X_OK) and name.endswith(".sh") else 0o644
            )
            count += 1
    return count


def commit_all(repo: Path, message: str, date: str) -> str:
    git(repo, "add", "-A", date=date)
    git(repo, "commit", "-q", "--no-verify", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD", date=date)


def build_service_repo(out: Path) -> dict[str, str]:
    repo = out / "service-repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    shas = {}
    for overlay, message, date, tag in SERVICE_HISTORY:
        copy_tree(TEMPLATES / "service" / overlay, repo)
        shas[tag] = commit_all(repo, message, date)
        git(repo, "tag", tag, date=date)  # lightweight tag: no tagger date to pin
    return shas


def build_factory(out: Path) -> str:
    factory = out / "factory"
    factory.mkdir(parents=True)
    git(factory, "init", "-q")
    copy_tree(TEMPLATES / "factory", factory)
    message, date = FACTORY_COMMIT
    return commit_all(factory, message, date)


def reset_output(out: Path) -> None:
    if out.exists():
        unexpected = {p.name for p in out.iterdir()} - OUTPUT_ENTRIES
        if unexpected:
            raise SystemExit(f"seed: refusing to delete {out}: it holds {sorted(unexpected)}")
        shutil.rmtree(out)
    out.mkdir(parents=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output directory (deleted and rebuilt; default: %(default)s)",
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    reset_output(out)
    service = build_service_repo(out)
    factory = build_factory(out)
    print(f"service-repo  {out / 'service-repo'}")
    for tag, sha in service.items():
        print(f"  {tag:<6} {sha}")
    print(f"factory       {out / 'factory'}")
    print(f"  main   {factory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
