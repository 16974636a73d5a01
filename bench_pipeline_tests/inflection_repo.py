"""A git repository of real third-party code: inflection 0.5.1 from its vendored PyPI sdist.

History (both commits made from the unmodified upstream files):

1. `base`: the package with one function reverted - `dasherize` returns its argument
   unchanged - and without the upstream test module `test_inflection.py`;
2. `fix`: "dasherize: replace underscores with dashes" - the upstream `dasherize` and the
   upstream test module back, byte for byte as released.

So the upstream tests of `dasherize` are FAIL_TO_PASS for a task based on `base`, and every
other upstream test is PASS_TO_PASS.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SDIST = FIXTURES / "inflection-0.5.1.tar.gz"
TEST_MODULE = "test_inflection.py"
# test_dasherize[street-street] passes with the reverted function too: it is PASS_TO_PASS.
DASHERIZE_IDS = (
    "test_inflection.py::test_dasherize[street_address-street-address]",
    "test_inflection.py::test_dasherize[person_street_address-person-street-address]",
)
HUMANIZE_IDS = (
    "test_inflection.py::test_humanize[employee_salary-Employee salary]",
    "test_inflection.py::test_humanize[employee_id-Employee]",
    "test_inflection.py::test_humanize[underground-Underground]",
)
OTHER_P2P = (
    "test_inflection.py::test_dasherize[street-street]",
    "test_inflection.py::test_camelize_with_underscores",
    "test_inflection.py::test_pluralize_empty_string",
)
UPSTREAM_DASHERIZE = "return word.replace('_', '-')"
REVERTED_DASHERIZE = "return word"
FIX_SUBJECT = "dasherize: replace underscores with dashes"


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Janne Vanhala",
        "GIT_AUTHOR_EMAIL": "janne.vanhala@gmail.com",
        "GIT_COMMITTER_NAME": "bench tests",
        "GIT_COMMITTER_EMAIL": "tests@bench.invalid",
        "GIT_AUTHOR_DATE": "2020-07-06T12:00:00Z",
        "GIT_COMMITTER_DATE": "2020-07-06T12:00:00Z",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo),
    }
    out = subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def verified_sdist() -> Path:
    expected = (FIXTURES / "inflection-0.5.1.tar.gz.sha256").read_text().split()[0]
    actual = hashlib.sha256(SDIST.read_bytes()).hexdigest()
    assert actual == expected, f"{SDIST.name} changed: sha256 {actual} != {expected}"
    return SDIST


def extract(dest: Path) -> Path:
    """The sdist's files under `dest` (the build leftovers an sdist carries dropped)."""
    with tarfile.open(verified_sdist()) as tar:
        tar.extractall(dest, filter="data")
    root = dest / "inflection-0.5.1"
    for junk in ("docs/__pycache__", "inflection.egg-info", "PKG-INFO"):
        path = root / junk
        if path.is_dir():
            for p in sorted(path.rglob("*"), reverse=True):
                p.unlink() if p.is_file() else p.rmdir()
            path.rmdir()
        elif path.exists():
            path.unlink()
    return root


def make_repo(tmp: Path) -> tuple[Path, str, str, Path]:
    """(repo, base sha, fix sha, upstream test module) - the upstream test file is returned
    outside the repo so a factory can hold it as a hidden test file."""
    upstream = extract(tmp / "sdist")
    repo = tmp / "inflection-repo"
    repo.mkdir()
    _git(repo, "init", "-q", "--initial-branch=main")
    for path in sorted(upstream.rglob("*")):
        if path.is_file():
            target = repo / path.relative_to(upstream)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    module = repo / "inflection" / "__init__.py"
    source = module.read_text()
    assert source.count(UPSTREAM_DASHERIZE) == 1
    module.write_text(source.replace(UPSTREAM_DASHERIZE, REVERTED_DASHERIZE))
    (repo / TEST_MODULE).unlink()
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Import inflection 0.5.1 without dasherize or its tests")
    base = _git(repo, "rev-parse", "HEAD")
    module.write_text(source)
    (repo / TEST_MODULE).write_bytes((upstream / TEST_MODULE).read_bytes())
    _git(repo, "add", "-A")
    _git(
        repo,
        "commit",
        "-q",
        "-m",
        f"{FIX_SUBJECT}\n\ndasherize('puni_puni') must return 'puni-puni'.",
    )
    fix = _git(repo, "rev-parse", "HEAD")
    return repo, base, fix, upstream / TEST_MODULE
