"""Authoring helper: regenerate the committed reference/original patches.

For every folder templates/solutions/<kind>/<task-id>/ (kind = references | originals)
this checks out the task's base_ref of a freshly seeded service repository, copies the
solved files over it and writes `git diff` to
templates/factory/benchmarks/invoices/<kind>/<task-id>.patch.
Run it after editing a solution or the service templates, then run verify_example.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent
TEMPLATES = DATA / "templates"
SUITE = TEMPLATES / "factory" / "benchmarks" / "invoices"
sys.path.insert(0, str(DATA))
import seed  # noqa: E402


def run(cwd, *args):
    return subprocess.run(
        ["git", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "example"
        seed.main(["--out", str(out)])
        repo = out / "service-repo"
        for kind in ("references", "originals"):
            for solution in sorted((TEMPLATES / "solutions" / kind).iterdir()):
                task = solution.name
                text = (SUITE / "tasks" / f"{task}.yaml").read_text()
                base_ref = re.search(r"^base_ref:\s*(\S+)", text, re.M).group(1)
                run(repo, "checkout", "-q", "--detach", base_ref)
                seed.copy_tree(solution, repo)
                patch = run(
                    repo,
                    "diff",
                    "--no-color",
                    "--no-ext-diff",
                    "--src-prefix=a/",
                    "--dst-prefix=b/",
                )
                assert patch, f"{kind}/{task}: empty diff"
                target = SUITE / kind / f"{task}.patch"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(patch)
                run(repo, "checkout", "-q", "--", ".")
                run(repo, "clean", "-qfdx")
                print(f"{kind}/{task}.patch  ({base_ref}, {patch.count(chr(10))} lines)")
    shutil.rmtree(DATA / "authoring" / "__pycache__", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
