"""`bench import manifest.json`: a Yard-style manifest becomes a suite + launch that validates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from bench_pipeline_tests.conftest import run_bench


def make_manifest(example: Path, tmp_path: Path) -> Path:
    src = tmp_path / "yard"
    (src / "graders").mkdir(parents=True)
    (src / "patches").mkdir()
    suite = example / "factory" / "benchmarks" / "invoices"
    shutil.copy(suite / "graders" / "amount_validation.py", src / "graders")
    shutil.copy(suite / "references" / "amount-precision.patch", src / "patches")
    manifest = {
        "schema_version": 1,
        "name": "yard-invoices",
        "repository": str(Path("..") / "example" / "service-repo"),
        "initial_commit": "v1.0",
        "prepare_commands": [["python", "-c", "print('ready')"]],
        "repetitions": 3,
        "max_attempts": 2,
        "timeout_seconds": 300,
        "max_cost_usd": 0.75,
        "cases": [
            {
                "id": "amount-precision",
                "title": "Reject negative amounts",
                "prompt": "parse_amount must refuse negative amounts and fractions of a cent.",
                "tags": ["validation"],
                "reference_patch": "patches/amount-precision.patch",
                "criteria": [
                    "the error message says what is wrong",
                    {
                        "id": "AC-1",
                        "description": "negative amounts and more than two decimals are refused",
                        "command": ["python", "graders/amount_validation.py", "{workspace}"],
                        "files": ["graders/amount_validation.py"],
                        "timeout_seconds": 60,
                    },
                ],
            }
        ],
        "variants": [
            {"id": "oracle", "kind": "reference"},
            {"id": "cheap", "kind": "noop", "max_cost_usd": 0.1, "max_attempts": 1},
        ],
    }
    path = src / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2))
    return path


def test_import_then_validate(example, bench_home, tmp_path):
    manifest = make_manifest(example, tmp_path)
    target = tmp_path / "imported"
    code, out, err = run_bench("import", str(manifest), "--factory", str(target), home=bench_home)
    assert code == 0, err
    assert "imported suite yard-invoices: 1 tasks, 2 configs x 3 reps" in out

    suite = yaml.safe_load((target / "benchmarks/yard-invoices/suite.yaml").read_text())
    assert suite["defaults"] == {"max_iterations": 2, "timeout_seconds": 300, "budget_usd": 0.75}
    assert suite["prepare_commands"] == [["python", "-c", "print('ready')"]]
    task = yaml.safe_load(
        (target / "benchmarks/yard-invoices/tasks/amount-precision.yaml").read_text()
    )
    assert task["base_ref"] == "v1.0"
    assert task["criteria"] == [
        "the error message says what is wrong",
        "negative amounts and more than two decimals are refused",
    ]
    (check,) = task["checks"]
    assert check["command"] == [
        "python",
        "{inputs}/graders/amount-precision/graders/amount_validation.py",
        "{workspace}",
    ]
    assert (
        target / "benchmarks/yard-invoices/graders/amount-precision/graders/amount_validation.py"
    ).is_file()
    launch = yaml.safe_load((target / "launches/yard-invoices.yaml").read_text())
    assert [c["id"] for c in launch["configs"]] == ["oracle", "cheap"]
    assert launch["configs"][1]["budget_usd"] == 0.1 and launch["repetitions"] == 3

    code, out, err = run_bench("validate", str(target), "--reference", home=bench_home)
    assert code == 0, out + err
    assert "ok    yard-invoices/amount-precision" in out

    # importing again never overwrites
    code, _, err = run_bench("import", str(manifest), "--factory", str(target), home=bench_home)
    assert code == 2 and "already exists" in err


def test_bad_manifest_is_one_clear_line(example, bench_home, tmp_path):
    manifest = make_manifest(example, tmp_path)
    data = json.loads(manifest.read_text())
    data["cases"][0]["criteria"][1]["comand"] = data["cases"][0]["criteria"][1].pop("command")
    manifest.write_text(json.dumps(data))
    target = tmp_path / "imported"
    code, _, err = run_bench("import", str(manifest), "--factory", str(target), home=bench_home)
    assert code == 2
    assert err.count("\n") == 1
    assert "manifest.json: cases[0].criteria[1].comand: unknown key; did you mean 'command'" in err
    assert not target.exists()

    data["cases"][0]["criteria"][1]["command"] = data["cases"][0]["criteria"][1].pop("comand")
    data["schema_version"] = 2
    manifest.write_text(json.dumps(data))
    code, _, err = run_bench("import", str(manifest), "--factory", str(target), home=bench_home)
    assert code == 2 and "schema_version: must be 1" in err

    # a manifest that parses but does not load (bad base commit) leaves nothing behind
    data["schema_version"] = 1
    data["initial_commit"] = "no-such-tag"
    manifest.write_text(json.dumps(data))
    code, _, err = run_bench("import", str(manifest), "--factory", str(target), home=bench_home)
    assert code == 2 and "no-such-tag" in err
    assert not target.exists()
