"""A Python grader's completion mark: a check passes only if its grader finished.

A check is its grader's exit code, and a grader that imports the code under test runs that
code in its own process. `os._exit(0)` at the top of the package's `__init__.py` ended every
grader of the demo with 0 before it checked anything: 14 checks of 14 passed for an agent that
solved nothing. So a grader that is a Python script (`python FILE.py ...`, the form the
factory's checks use) runs under a small launcher. The launcher writes a mark (random per run,
read once from stdin) after the script finished by itself: it returned, or it raised a
`SystemExit` through no frame of the workspace's code, with `sys.exit` still the
interpreter's own. A passing exit code without the mark fails the check, and so does an exit
code the check did not declare (alone a grader fault, inconclusive): `os._exit(2)` in the
package made every check of the task unscored. With the mark, such a code is the grader's own
word, and stays inconclusive.

This closes ending early, not fooling the grader on purpose: the code under test runs in the
grader's process and could read the mark. A grader that must hold against that runs the code
in a process of its own, or the task uses the `tests` criterion (pytest's report).
"""

from __future__ import annotations

import dataclasses
import secrets
import sys
from pathlib import Path

from bench_pipeline.workspace.process import CommandResult, resolve_argv, take_mark

# (its state in a function's locals, not the grader's globals, where the code under test would
# find the mark at once; the script is exec'd in __main__ as `python FILE.py` runs it, without
# runpy's imports: ~1 ms a check instead of ~5)
LAUNCHER = r"""
def _bench_launch():
    import os, sys
    mark = sys.stdin.readline().strip().encode()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    if not sys.flags.safe_path:  # (as `python FILE.py` puts the script's real folder first)
        sys.path[0] = os.path.dirname(os.path.realpath(script))
    workspace = os.path.realpath(os.getcwd()) + os.sep
    own_exit = sys.exit
    with open(script, "rb") as file:
        compiled = compile(file.read(), script, "exec")
    main = sys.modules["__main__"].__dict__
    del main["_bench_launch"]
    main["__file__"] = os.path.abspath(script)
    main["__cached__"] = None
    code, finished = 0, True
    try:
        exec(compiled, main)
    except SystemExit as exc:
        code = exc.code
        tb = exc.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename  # ("<string>", this launcher, is no file)
            if os.path.isabs(name) and os.path.realpath(name).startswith(workspace):
                finished = False
            tb = tb.tb_next
    if sys.exit is not own_exit:
        finished = False
    if code is None:
        code = 0
    elif isinstance(code, int):
        # (sys.exit(False), as unittest.main does: 0; and the code as the process ends with
        # it, the low byte: sys.exit(-1) ends it with 255, which the mark must name)
        code = int(code) & 0xFF
    else:
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if finished:  # (with the code: an atexit hook that os._exits with another is caught)
        os.write(1, b"\n" + mark + b":" + str(code).encode() + b"\n")
    return code


raise SystemExit(_bench_launch())
"""

UNFINISHED = (
    "the grader did not finish: its process ended with a passing code before the grader was "
    "done (os._exit, or sys.exit from the workspace's code) or sys.exit was replaced; a check "
    "cannot pass that way"
)
ENDED_EARLY = (
    "the grader did not finish: its process ended before the grader was done (os._exit or "
    "sys.exit from the workspace's code, a signal, a crash), which the code under test did"
)


def launch(argv: list[str], workspace: Path) -> tuple[list[str], str] | None:
    """`argv` run under the launcher, and the mark to send on its stdin; None when `argv` is
    not `python SCRIPT.py ...` (after `{inputs}`/`{workspace}` were substituted: `python -u`,
    `python -m` and other interpreters run as they are), or when the script lies in the
    workspace (the repository's own script: the agent can change it, so nothing to guard)."""
    if len(argv) < 2 or not argv[1].endswith(".py") or argv[1].startswith("-"):
        return None
    script = (workspace / argv[1]).resolve()  # (a relative path: from the workspace, its cwd)
    if resolve_argv(argv[:1]) != [sys.executable] or not script.is_file():
        return None
    if script.is_relative_to(workspace.resolve()):
        return None
    return [argv[0], "-c", LAUNCHER, *argv[1:]], secrets.token_hex(16)


def finished(result: CommandResult, argv: list[str], mark: str) -> tuple[CommandResult, bool]:
    """The result as the grader's own (its argv as written, the mark taken out of its output)
    and whether the grader finished with the code its process ended with: the mark is there
    and names that code. (Not always last: an atexit handler, a thread or a child can print
    after it; and one can end the process with another code, `os._exit(0)` after a grader
    that failed, which is not the grader's verdict.)"""
    found = take_mark(result.output, mark)
    if found is None:
        return dataclasses.replace(result, argv=argv), False
    output, code = found
    done = code is not None and code == result.exit_code
    return dataclasses.replace(result, argv=argv, output=output), done
