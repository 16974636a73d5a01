"""Where a bench installation keeps its state: every folder derives from one home."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.warehouse.store import Warehouse


@dataclass(frozen=True)
class BenchPaths:
    """Where a bench installation keeps its state (all derived from one home folder)."""

    home: Path
    warehouse_root: str

    @classmethod
    def from_home(cls, home: str | Path, warehouse_root: str | None = None) -> BenchPaths:
        home = Path(home).absolute()
        return cls(home, warehouse_root or str(home / "warehouse"))

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.warehouse_root)

    def evidence_root(self, run_id: str) -> Path:
        return self.home / "evidence" / run_id

    @property
    def work_root(self) -> Path:
        return self.home / "work"

    def inputs_root(self, run_id: str) -> Path:
        """The run's grader files and references as frozen (every trial copies from here)."""
        return self.home / "inputs" / run_id

    @property
    def prepare_cache(self) -> Path:
        """Caches of `prepare` commands, one folder per key (see trials.prepare)."""
        return self.home / "cache" / "prepare"

    @property
    def objects_cache(self) -> Path:
        """The trials' git object stores, one per repository and base commit (see
        workspace.repo.base_objects)."""
        return self.home / "cache" / "objects"

    def cancel_flag(self, run_id: str) -> Path:
        return self.home / "cancel" / run_id

    def pid_registry(self, run_id: str) -> Path:
        """Process groups a run's trials have alive (killed when the run is found orphaned)."""
        return self.home / "pids" / run_id


def default_home() -> Path:
    return Path(os.environ.get("BENCH_HOME") or Path.cwd() / ".bench").absolute()


def check_home(home: Path, source: str) -> None:
    """Refuse, before anything runs, a state folder that is a file or cannot be written.
    `source` names where the path came from (BENCH_HOME, --home) for the one-line error."""
    if home.exists() and not home.is_dir():
        raise BenchInputError(
            str(home), source, "is a file, not a folder; point it at a folder bench may write"
        )
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BenchInputError(
            str(home),
            source,
            f"cannot write there ({exc.strerror}); point it at a folder bench may write",
        ) from None
