from __future__ import annotations

import os
import textwrap

import pytest

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.scorers import make_scorer
from bench_pipeline.scorers.base import SCORE_ERROR, SCORE_NOT_SCORED, SCORE_SCORED
from bench_pipeline_tests.test_scorer_support import code_task, context, trial

PATCH = "diff --git a/x.py b/x.py\n+print('hi')\n+print('there')\n"


def factory(tmp_path, name: str, text: str):
    root = tmp_path / "factory"
    (root / "scorers").mkdir(parents=True, exist_ok=True)
    (root / "scorers" / name).write_text(textwrap.dedent(text))
    return root


def run(root, spec: str, tmp_path, **kw):
    scorer = make_scorer(spec, context(root))
    scorer.preflight()
    evidence = tmp_path / "evidence"
    evidence.mkdir(exist_ok=True)
    return scorer.score(trial(code_task(), evidence, patch=PATCH, **kw))


def test_python_scorer(tmp_path):
    root = factory(
        tmp_path,
        "diffsize.py",
        """
        def score(trial):
            added = [l for l in trial["diff"].splitlines() if l.startswith("+")]
            return {"score": 1.0 if len(added) <= 5 else 0.0,
                    "reason": f"{len(added)} added lines in {trial['task']['id']}"}
    """,
    )
    (r,) = run(root, "workflow:diffsize", tmp_path)
    assert (r.scorer, r.status, r.value) == ("workflow:diffsize", SCORE_SCORED, 1.0)
    assert r.reason == "2 added lines in tenant-isolation"


def test_python_scorer_scale_and_not_scored(tmp_path):
    root = factory(
        tmp_path,
        "stars.py",
        """
        def score(trial):
            if trial["config"]["model"] is None:
                return {"score": None, "reason": "no model"}
            return {"score": 3, "scale_max": 4, "reason": "three stars", "details": {"k": 1}}
    """,
    )
    (r,) = run(root, "workflow:stars", tmp_path)
    assert (r.value, r.raw_value, r.scale_max, r.details["k"]) == (0.75, 3, 4, 1)
    factory(tmp_path, "na.py", "def score(trial):\n    return {'score': None, 'reason': 'n/a'}\n")
    (r,) = run(root, "workflow:na", tmp_path)
    assert (r.status, r.value, r.reason) == (SCORE_NOT_SCORED, None, "n/a")


def test_python_scorer_exception_and_bad_answer_are_errors(tmp_path):
    root = factory(tmp_path, "boom.py", "def score(trial):\n    raise KeyError('diff')\n")
    (r,) = run(root, "workflow:boom", tmp_path)
    assert r.status == SCORE_ERROR and r.value is None and "KeyError" in r.reason
    factory(tmp_path, "bad.py", "def score(trial):\n    return {'score': 'great'}\n")
    (r,) = run(root, "workflow:bad", tmp_path)
    assert r.status == SCORE_ERROR and "must be a number" in r.reason
    factory(tmp_path, "over.py", "def score(trial):\n    return {'score': 2, 'reason': ''}\n")
    (r,) = run(root, "workflow:over", tmp_path)
    assert r.status == SCORE_ERROR and "outside" in r.reason


def test_command_scorer(tmp_path):
    root = factory(
        tmp_path,
        "lint.yaml",
        """
        command: [python, "{scorers}/lint_impl.py", "{evidence}"]
        timeout_seconds: 30
    """,
    )
    (root / "scorers" / "lint_impl.py").write_text(
        textwrap.dedent("""
        import json, sys
        trial = json.load(open(sys.argv[1]))
        print("checking", trial["trial_id"])  # log noise before the JSON line is tolerated
        ok = "print(" in trial["diff"]
        print(json.dumps({"score": 4 if ok else 0, "scale_max": 5,
                          "reason": f"outcome {trial['outcome']}"}))
    """)
    )
    (r,) = run(root, "workflow:lint", tmp_path)
    assert (r.scorer, r.status, r.value, r.raw_value) == ("workflow:lint", SCORE_SCORED, 0.8, 4)
    assert r.reason == "outcome succeeded"


def test_command_scorer_failures_are_errors(tmp_path):
    root = factory(tmp_path, "crash.yaml", 'command: [python, "-c", "import sys; sys.exit(3)"]\n')
    (r,) = run(root, "workflow:crash", tmp_path)
    assert r.status == SCORE_ERROR and "exited 3" in r.reason
    factory(tmp_path, "nojson.yaml", 'command: [python, "-c", "print(\'score: 1\')"]\n')
    (r,) = run(root, "workflow:nojson", tmp_path)
    assert r.status == SCORE_ERROR and "no JSON" in r.reason


def test_failed_trial_gate_applies(tmp_path):
    root = factory(
        tmp_path, "any.py", "def score(trial):\n    return {'score': 1, 'reason': 'x'}\n"
    )
    (r,) = run(root, "workflow:any", tmp_path, outcome="budget_exceeded", error="$5 spent")
    assert (r.status, r.value) == (SCORE_SCORED, 0.0)
    (r,) = run(root, "workflow:any", tmp_path, outcome="workspace_error")
    assert r.status == SCORE_NOT_SCORED


def test_refuses_missing_escaping_ambiguous_and_bad_yaml(tmp_path):
    root = factory(tmp_path, "dup.py", "def score(t):\n    return {'score': 1}\n")
    factory(tmp_path, "dup.yaml", "command: [true]\n")
    with pytest.raises(BenchInputError, match="ambiguous"):
        make_scorer("workflow:dup", context(root)).preflight()
    with pytest.raises(BenchInputError, match="no scorers/absent.py"):
        make_scorer("workflow:absent", context(root)).preflight()
    with pytest.raises(BenchInputError, match="must match"):
        make_scorer("workflow:../evil", context(root)).preflight()
    outside = tmp_path / "outside.py"
    outside.write_text("def score(t):\n    return {'score': 1}\n")
    os.symlink(outside, root / "scorers" / "escape.py")
    with pytest.raises(BenchInputError, match="outside the factory"):
        make_scorer("workflow:escape", context(root)).preflight()
    factory(tmp_path, "typo.yaml", "comand: [true]\n")
    with pytest.raises(BenchInputError, match="did you mean 'command'"):
        make_scorer("workflow:typo", context(root)).preflight()


def test_a_scorer_that_calls_sys_exit_is_an_error_not_the_end_of_bench(tmp_path):
    """sys.exit(5) in score() ended the whole run (`step launch: SystemExit: 5`), and
    `raise SystemExit(3)` at the module's top made `bench validate` exit 3 without a word."""
    root = factory(tmp_path, "quits.py", "import sys\n\ndef score(trial):\n    sys.exit(5)\n")
    (r,) = run(root, "workflow:quits", tmp_path)
    assert r.status == SCORE_ERROR and "SystemExit" in r.reason
    factory(tmp_path, "quits_early.py", "raise SystemExit(3)\n\ndef score(trial):\n    pass\n")
    with pytest.raises(BenchInputError, match="import failed: SystemExit: 3"):
        run(root, "workflow:quits_early", tmp_path)
