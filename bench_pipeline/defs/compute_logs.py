"""A step's stdout and stderr captured as Dagster captures them, without helper processes.

Dagster's `LocalComputeLogManager` points the step's stdout and stderr at a file each and, so
that the output still reaches the terminal, starts for each stream a `tail -F` of the file and a
Python interpreter that kills the tail if the step's process dies: four processes per step.
Measured here after `import dagster, pandas, pyarrow`: 0.04-0.06 s of wall time and 0.05-0.08 s
of the children's CPU per step, a twentieth of a one-trial `bench run` (and one core of two
busy starting interpreters while the trial runs).

`ThreadedComputeLogManager` writes the same files in the same places, so `dagster dev` and every
reader of a `LocalComputeLogManager` show them as before; what lands in a file is copied to the
terminal by a thread of the step's process (polling, as `tail -F` does, and drained when the
step ends). Nothing outlives the step, so nothing needs watching. A stream without a file
descriptor (a test runner's) is not captured, as Dagster's is not.

Configured in the dagster.yaml `bench` writes for a new DAGSTER_HOME:

    compute_logs:
      module: bench_pipeline.defs.compute_logs
      class: ThreadedComputeLogManager
      config:
        base_dir: "/absolute/path/of/the/dagster_home/storage"
"""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import (
    IO_TYPE_EXTENSION,
    LocalComputeLogManager,
)
from dagster._utils import ensure_file, touch_file

# How often the copier looks for new output: `tail -F` looks once a second.
POLL_SECONDS = 0.1
_CHUNK = 1 << 16


class ThreadedComputeLogManager(LocalComputeLogManager):
    """`LocalComputeLogManager` whose capture copies the files to the terminal from a thread."""

    @classmethod
    def from_config_value(
        cls, inst_data: Any, config_value: dict[str, Any]
    ) -> ThreadedComputeLogManager:
        # (the parent's names its own class: inherited, dagster.yaml would get Dagster's)
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        out = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        err = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        with mirrored(sys.stdout, out), mirrored(sys.stderr, err):
            yield CapturedLogContext(log_key)
        # (as Dagster's: the artifact that says the capture is complete)
        touch_file(self.complete_artifact_path(log_key))


def _fileno(stream: IO[Any]) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return fd if isinstance(fd, int) else None


@contextmanager
def mirrored(stream: IO[Any], path: str) -> Iterator[None]:
    """`stream`'s file descriptor (so the process's and its children's output) written to
    `path` (appended) while the block runs, and copied from there to where it went before."""
    ensure_file(path)
    fd = _fileno(stream)
    if fd is None:
        yield
        return
    stream.flush()
    terminal = os.dup(fd)
    try:
        with open(path, "ab", buffering=0) as sink:
            start = os.fstat(sink.fileno()).st_size  # (a step run again: not its old output)
            os.dup2(sink.fileno(), fd)
        stop = threading.Event()
        copier = threading.Thread(
            target=_copy, args=(path, start, terminal, stop), name="compute-log copy", daemon=True
        )
        copier.start()
        try:
            yield
        finally:
            try:
                stream.flush()
            finally:
                os.dup2(terminal, fd)
                stop.set()
                copier.join()
    finally:
        os.close(terminal)


def _copy(path: str, offset: int, terminal: int, stop: threading.Event) -> None:
    """Copy what `path` gets past `offset` to `terminal` until `stop`, then the rest. A file
    that cannot be read (removed under the step) leaves the terminal without the output, never
    the step without its capture."""
    try:
        source = open(path, "rb")  # noqa: SIM115 (closed by the `with` below)
    except OSError:
        return
    with source:
        source.seek(offset)
        writable = True
        while True:
            stopping = stop.wait(POLL_SECONDS)
            while chunk := source.read(_CHUNK):
                if writable:
                    writable = _write_all(terminal, chunk)
            if stopping:
                return


def _write_all(fd: int, data: bytes) -> bool:
    """Write all of `data`; False when the terminal is gone (a closed pipe): the file still
    gets everything, the terminal nothing more."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:
            continue
        except OSError:
            return False
    return True
