"""The `bench` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """The `bench` entry point: the command runs in a warm `bench serve` of its home when one
    runs (`cli.handoff`, standard library only), else here (`cli.main`)."""
    import os

    from bench_pipeline.cli.handoff import hand_off

    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # (relative paths, the server's hand-off and the paths shown all start from it)
        os.getcwd()
    except FileNotFoundError:
        print(
            "error: the current folder no longer exists (removed or moved since this shell "
            "entered it); cd to one that does",
            file=sys.stderr,
        )
        return 2
    served = hand_off(argv)
    if served is not None:
        return served
    from bench_pipeline.cli.main import main as run_here

    return run_here(argv)


def console() -> int:
    """The `bench` console script: `main`, then out of the process without Python's teardown.

    Freeing every module and object a command loaded is time the user waits for nothing the
    OS would not do: measured ~0.45 s after `import dagster` alone and ~0.9 s after a one-trial
    `bench run`, a quarter of its time. What exit must still do is done: the atexit handlers
    run (logging's flush, temporary folders) and stdout and stderr are flushed. With a thread
    other than a daemon still running, the interpreter ends the process as usual (its
    shutdown joins such threads, and tells executors' idle workers to stop first).

    The garbage collector is off until the command's imports are done (`cli.collector`)."""
    from bench_pipeline.cli import collector

    collector.pause()
    code = main()
    import threading

    if any(
        t.is_alive() and not t.daemon and t is not threading.main_thread()
        for t in threading.enumerate()
    ):
        return code
    import atexit
    import os

    atexit._run_exitfuncs()  # (the one way to run them now; as the interpreter's exit would)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`bench results | head`): nothing to add
            pass
    os._exit(code)


__all__ = ["console", "main"]
