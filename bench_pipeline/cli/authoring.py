"""`bench import`, `tasks from-commit`, `promote`: write tasks and configurations into a factory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_pipeline.cli import common
from bench_pipeline.runs.benchmark_run import run_exists


def cmd_promote(args: argparse.Namespace) -> int:
    """Write a config's model/effort/skills into its agent file on a new branch (and open a PR)."""

    from bench_pipeline.authoring.promote import check_promotable, promote
    from bench_pipeline.runs.derived import compute_derived

    paths = common.paths_of(args)
    if not run_exists(paths.warehouse, args.run):
        raise common.CliError(f"RUN: no benchmark run '{args.run}' in {paths.warehouse.root}")
    run = common.load_run_of(paths, args.run)
    check_promotable(run, args.config)
    derived = compute_derived(paths.warehouse, args.run)
    rows = [
        r for r in common.records(derived.tables["config_table"]) if r["config_id"] == args.config
    ]
    if not rows:
        raise common.CliError(f"CONFIG: run {args.run} has no results for '{args.config}'")
    tag_row = None
    if args.tag:
        by_tag = common.records(derived.tables["config_table_by_tag"])
        tag_rows = [r for r in by_tag if r["config_id"] == args.config and r["tag"] == args.tag]
        if not tag_rows:
            tags = sorted({str(r["tag"]) for r in by_tag})
            raise common.CliError(
                f"--tag: no tag '{args.tag}' in run {args.run} (tags: {', '.join(tags)})"
            )
        tag_row = tag_rows[0]
    try:
        result = promote(run, args.config, rows[0], tag=args.tag, tag_row=tag_row)
    except RuntimeError as exc:  # pushing or the pull request failed; the branch exists
        print(f"error: {exc}", file=sys.stderr)
        return common.EXIT_FAILED
    print(f"branch {result.branch} ({result.commit[:12]}): {result.agent_file}")
    for key, value in result.changes.items():
        print(f"  {key}: {value}")
    for note in result.notes:
        print(f"note: {note}")
    if result.pull_request:
        print(f"pull request: {result.pull_request}")
    return common.EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    """Convert a Yard-style manifest (schema_version 1) to a suite + launch."""

    from bench_pipeline.authoring.importer import import_manifest

    out = import_manifest(args.manifest, args.factory, args.suite)
    launch = out["launch"]
    print(
        f"imported suite {out['suite']}: {len(launch.tasks)} tasks, "
        f"{len(launch.configs)} configs x {launch.repetitions} reps into {out['factory']}"
    )
    print(f"launch: {Path(out['factory']) / 'launches' / (out['suite'] + '.yaml')}")
    for agent in out["agents"]:
        print(f"agent:  agents/{agent}.yaml")
    print(f"next: bench validate {out['factory']} --reference")
    return common.EXIT_OK


def cmd_from_commit(args: argparse.Namespace) -> int:
    from bench_pipeline.authoring.from_commit import draft_from_commit

    d = draft_from_commit(args.repo, args.sha, args.factory, args.suite, args.id, args.agent)
    print(f"drafted task {d.suite}/{d.task_id} from {args.sha} (base {d.base_sha[:12]})")
    print(f"  task:      {d.task_file}")
    print(f"  reference: {d.reference}")
    print(
        f"  tests:     {', '.join(d.tests)} (run with {d.runner}): "
        f"{len(d.fail_to_pass)} fail_to_pass, {len(d.pass_to_pass)} pass_to_pass"
    )
    for note in d.notes:
        print(f"note: {note}")
    print(
        f"next: edit the prompt, then `bench validate {Path(args.factory).absolute()} --reference`"
    )
    return common.EXIT_OK


def register(add: common.AddCommand) -> None:
    p = add("promote", cmd_promote)
    p.add_argument("run", metavar="RUN")
    p.add_argument("config", metavar="CONFIG")
    p.add_argument("--tag", help="also put this tag's results in the commit message")

    i = add("import", cmd_import)
    i.add_argument("manifest")
    i.add_argument("--factory", default=".", help="factory folder (default .; created if missing)")
    i.add_argument("--suite", help="suite name (default: the manifest's name, else its file name)")

    t = add("tasks", lambda a: common.EXIT_OK, "author tasks")
    tsub = t.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    fc = tsub.add_parser(
        "from-commit",
        help="draft a task from a past commit: base = parent, reference = its non-test change",
        description="draft a task from a past commit: base = parent, reference = its non-test "
        "change, check = the tests it touched",
    )
    fc.set_defaults(fn=cmd_from_commit)
    fc.add_argument("repo", metavar="REPO")
    fc.add_argument("sha", metavar="SHA")
    fc.add_argument("--suite", required=True)
    fc.add_argument("--id", help="task id (default: from the commit subject)")
    fc.add_argument("--factory", default=".", help="factory folder (default .)")
    fc.add_argument("--agent", help="agent of a new suite (default: the factory's first agent)")
