"""`bench validate --reference`: every task fails on its base and passes with its reference."""

from __future__ import annotations

from pathlib import Path

from bench_pipeline_tests.conftest import run_bench


def test_example_factory_validates_with_references(factory: Path, bench_home: Path) -> None:
    code, out, err = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 0, out + err
    ok = [ln for ln in out.splitlines() if ln.startswith("ok    invoices/")]
    assert len(ok) == 14
    assert all("failed" in ln.split("->")[0] and "failed" not in ln.split("->")[1] for ln in ok)
    assert (
        not list((bench_home / "warehouse").rglob("*.parquet"))
        if (bench_home / "warehouse").exists()
        else True
    )


def test_a_reference_that_does_not_pass_names_the_task(factory: Path, bench_home: Path) -> None:
    # Swap in a reference patch that applies but solves nothing (adds a notes file).
    ref = factory / "benchmarks/invoices/references/pagination.patch"
    ref.write_text(
        "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.md\n"
        "@@ -0,0 +1 @@\n+note\n"
    )
    code, out, _ = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 1
    (line,) = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert "invoices/pagination" in line and "reference patch does not pass" in line


def test_checks_that_already_pass_on_the_base_name_the_task(
    factory: Path, bench_home: Path
) -> None:
    task = factory / "benchmarks/invoices/tasks/tax-rounding.yaml"
    text = task.read_text()
    start = text.index("checks:")
    end = text.find("\noriginal:", start)
    tail = "" if end == -1 else text[end:]
    task.write_text(
        text[:start]
        + 'checks:\n  - id: AC-1\n    description: always passes\n    command: [python, -c, "pass"]\n'
        + tail
    )
    code, out, _ = run_bench("validate", str(factory), "--reference", home=bench_home)
    assert code == 1
    (line,) = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert "invoices/tax-rounding" in line and "already pass on the base" in line
