"""The instance's SQLite storage, with connections kept open instead of opened per statement.

Dagster's SQLite run and event-log storages build a new engine, open the database file and
dispose of both for every statement they run (`NullPool`): a one-trial `bench run` stores a
few dozen events and opens ~120 connections, about a second of its wall time. These
subclasses keep one pooled engine per database file (the event log has one file per run
plus the index, so the most recently used few are kept and older ones disposed). Nothing
else changes: the same files, tables, migrations and WAL mode, so an instance written by
either storage is read by the other, and `dagster dev` (which loads the same dagster.yaml)
uses it too.

A run's event-log file is new for every run, and Dagster initialises each one through alembic,
which loads its 445 migration scripts to learn the head revision (~0.45 s of a one-trial run).
A new run's file is instead copied from an empty, stamped one built once per Dagster version
(`.empty-run-shard-<version>.db` beside the run files) by Dagster's own initialisation: the
same tables, indexes, WAL mode and alembic revision. A file that already exists (the run
history, the schedules and the index, which every process opens, or a run's file opened again)
is checked as Dagster's initialisation checks it, without the scripts: Dagster makes tables
only in a file without an alembic revision, and never upgrades one that has one (`dagster
instance migrate` does). Each such check cost ~0.05 s: three of every `bench` process, and one
of every served command.

A new instance (no history and no schedules folder yet) does not run Dagster's initialisation
either: every one of its files would load the scripts again (~0.3 s of a new home's first
`bench` command). Its files are copied from templates that Dagster's own initialisation made
once per machine and Dagster version, in the user's cache folder
(`$XDG_CACHE_HOME/bench_pipeline/dagster-<version>-instance`, else `~/.cache/...`): the same
tables, indexes, migration markers, WAL mode and alembic revision, and no instance id (Dagster
draws one on first use, so two instances never share it). Where the cache cannot be written,
the instance is initialised by Dagster as before.

Commits are durable as the warehouse's own files are: `PRAGMA synchronous=NORMAL`, which WAL
mode makes safe from corruption, and which loses no commit when a process dies (kill -9 mid
run: `bench run --resume` finds every event); only an OS crash or power loss may roll back the
last commits, as it may lose the last results files (written by rename, not fsync'd). SQLite's
default, FULL, syncs the disk at every commit: ~1 ms each here, a few per event, ~0.1 s of a
one-trial run.

Changes to the concurrency pools (the `bench_trials` slots, the steps waiting for one, their
limits) are made one process at a time, under a lock file beside the event-log files. Dagster's
SQL storage reads a pool's free slots, or counts its slots, and then writes, outside one
transaction on SQLite: two `bench run`s starting together on a new instance both ran their
trials in a pool of one slot.

Configured in the dagster.yaml `bench` writes for a new DAGSTER_HOME:

    storage:
      custom:
        module: bench_pipeline.defs.storage
        class: BenchSqliteStorage
        config:
          base_dir: "/absolute/path/of/the/dagster_home"
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import sqlite3
import tempfile
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as db
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite import create_db_conn_string
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData
from dagster._utils import mkdir_p
from dagster.version import __version__ as DAGSTER_VERSION

from bench_pipeline.formats.files import replacing

# A daemon or webserver touches many runs' event-log files over its life: keep the newest few
# (the index, which every asset event goes through, is always kept).
OPEN_EVENT_LOG_FILES = 8

T = TypeVar("T")
# The empty, stamped event-log file a new run's file is copied from (beside the run files).
EMPTY_RUN_SHARD = f".empty-run-shard-{DAGSTER_VERSION}.db"


_ENGINES: weakref.WeakSet[db.engine.Engine] = weakref.WeakSet()


def _engine(conn_string: str) -> db.engine.Engine:
    # SQLAlchemy pools connections to a file database and lets any thread use them; SQLite's
    # own locking (WAL, busy timeout) is what orders writers across processes, as before.
    engine = db.create_engine(conn_string, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    db.event.listen(engine, "connect", _synchronous_normal)
    _ENGINES.add(engine)
    return engine


def _synchronous_normal(dbapi_connection: Any, _record: Any) -> None:
    # Per connection: SQLite does not store the setting in the file (module doc: why NORMAL).
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


def _stamped_file(path: str, table: str) -> bool:
    """Whether the SQLite file at `path` has an alembic revision and `table`: then Dagster's
    `from_local` would only construct the storage (it makes tables of a file without either)."""
    if not os.path.exists(path):
        return False
    conn = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
    try:
        return (
            conn.execute("SELECT 1 FROM alembic_version LIMIT 1").fetchone() is not None
            and conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            is not None
        )
    except sqlite3.DatabaseError:  # no alembic table, or not a database: Dagster's way
        return False
    finally:
        conn.close()


def _stamped(engine: db.engine.Engine) -> bool:
    """Whether the file has an alembic revision: then Dagster's `_initdb` would do nothing."""
    with engine.connect() as conn:
        try:
            return (
                conn.execute(db.text("SELECT 1 FROM alembic_version LIMIT 1")).first() is not None
            )
        except db.exc.OperationalError:  # no such table: a new (or foreign) file
            return False


def _close_connections_before_fork() -> None:
    # SQLite must not see an open connection cross a fork (sqlite.org/howtocorrupt.html 2.6):
    # the child's copy of SQLite's per-file lock records says "this process holds the locks"
    # while the child holds none (fcntl locks are not inherited), so its own new connection
    # takes none either, and another process may checkpoint and delete the WAL the child is
    # still writing to (measured: the child's commits lost). So the parent (`bench serve`, a
    # celery prefork worker) closes its idle pooled connections first; it reopens on next use.
    for engine in list(_ENGINES):
        engine.dispose()


def _forget_inherited_connections() -> None:
    # And a connection the parent had checked out at the fork is never used by the child:
    # each engine gets a fresh pool there, the parent's is left to the parent.
    for engine in list(_ENGINES):
        engine.dispose(close=False)


os.register_at_fork(
    before=_close_connections_before_fork, after_in_child=_forget_inherited_connections
)


class PooledSqliteRunStorage(SqliteRunStorage):
    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None):
        self._pooled = _engine(conn_string)
        super().__init__(conn_string, inst_data)

    @contextmanager
    def connect(self) -> Iterator[db.Connection]:
        with self._pooled.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        self._pooled.dispose()


# The lock file of the pools' changes, beside the event-log files.
POOL_LOCK = ".concurrency-pools.lock"
_pool_lock = threading.local()  # `held`: this thread's pool change makes another (no relock)


def _pools_locked(method: Callable[..., T]) -> Callable[..., T]:
    """`method` of the storage run under the pools' lock file (an exclusive `flock`, which
    also excludes the other threads of this process: each opens the file on its own)."""

    @functools.wraps(method)
    def locked(self: PooledSqliteEventLogStorage, *args: Any, **kwargs: Any) -> T:
        if getattr(_pool_lock, "held", False):
            return method(self, *args, **kwargs)
        with open(os.path.join(self._base_dir, POOL_LOCK), "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)  # (released when the file closes)
            _pool_lock.held = True
            try:
                return method(self, *args, **kwargs)
            finally:
                _pool_lock.held = False

    return locked


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        # Set before Dagster's __init__, which already connects to the index.
        self._engines: OrderedDict[str, db.engine.Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        super().__init__(base_dir, inst_data)

    # Every change to the pools, one process at a time (module docstring).
    _reconcile_concurrency_limits_from_slots = _pools_locked(
        SqliteEventLogStorage._reconcile_concurrency_limits_from_slots
    )
    initialize_concurrency_limit_to_default = _pools_locked(
        SqliteEventLogStorage.initialize_concurrency_limit_to_default
    )
    set_concurrency_slots = _pools_locked(SqliteEventLogStorage.set_concurrency_slots)
    delete_concurrency_limit = _pools_locked(SqliteEventLogStorage.delete_concurrency_limit)
    add_pending_step = _pools_locked(SqliteEventLogStorage.add_pending_step)
    assign_pending_steps = _pools_locked(SqliteEventLogStorage.assign_pending_steps)
    claim_concurrency_slot = _pools_locked(SqliteEventLogStorage.claim_concurrency_slot)
    free_concurrency_slots_for_run = _pools_locked(
        SqliteEventLogStorage.free_concurrency_slots_for_run
    )
    free_concurrency_slot_for_step = _pools_locked(
        SqliteEventLogStorage.free_concurrency_slot_for_step
    )

    def _shard_engine(self, shard: str) -> db.engine.Engine:
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is not None:
                self._engines.move_to_end(shard)
                return engine
            engine = self._engines[shard] = _engine(self.conn_string_for_shard(shard))
            runs = [s for s in self._engines if s != INDEX_SHARD_NAME]
            for oldest in runs[: max(0, len(runs) - OPEN_EVENT_LOG_FILES)]:
                self._engines.pop(oldest).dispose()
            return engine

    def _empty_run_shard(self) -> str:
        """The path of an initialised, empty run event-log file for this Dagster version,
        built by Dagster's own `_initdb` the first time (atomically: a rename)."""
        path = os.path.join(self._base_dir, EMPTY_RUN_SHARD)
        if not os.path.exists(path):
            with replacing(path) as tmp:
                engine = db.create_engine(f"sqlite:///{tmp}", poolclass=db.pool.NullPool)
                try:
                    self._initdb(engine)
                finally:
                    engine.dispose()  # the last connection's close checkpoints the WAL into it
        return path

    def _create_run_shard(self, shard: str) -> bool:
        """Copy the empty run file into place for a run that has none; False when it exists
        (another process made it first, or a run's file is reopened): then Dagster checks it."""
        target = self.path_for_shard(shard)
        if os.path.exists(target):
            return False
        # Not mkstemp: its file would be private (0600), Dagster's files follow the umask.
        tmp = os.path.join(self._base_dir, f".{shard}-{os.getpid()}-{uuid.uuid4().hex}.db")
        try:
            shutil.copyfile(self._empty_run_shard(), tmp)
            os.link(tmp, target)  # never replaces a file another process just created
        except FileExistsError:
            return False
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return True

    @contextmanager
    def _connect(self, shard: str) -> Iterator[db.Connection]:
        with self._db_lock:
            engine = self._shard_engine(shard)
            if shard not in self._initialized_dbs:
                if shard == INDEX_SHARD_NAME or not self._create_run_shard(shard):
                    if not _stamped(engine):
                        self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def dispose(self) -> None:
        super().dispose()
        with self._engines_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()


class BenchSqliteStorage(DagsterSqliteStorage):
    """Dagster's SQLite storage (same layout under `base_dir`) with pooled connections."""

    def __init__(
        self, base_dir: str, inst_data: ConfigurableClassData | None = None, *, seed: bool = True
    ):
        # DagsterSqliteStorage.__init__ builds the plain storages; build the pooled ones in
        # their place (same directories as Dagster's default for a DAGSTER_HOME).
        self.base_dir = base_dir
        runs, schedules = _runs_directory(base_dir), _schedule_directory(base_dir)
        if seed and not os.path.exists(runs) and not os.path.exists(schedules):
            seed_new_instance(base_dir)
        # An existing file is opened without Dagster's alembic check (module doc).
        if _stamped_file(os.path.join(runs, "runs.db"), "instance_info"):
            self._run_storage = PooledSqliteRunStorage(create_db_conn_string(runs, "runs"))
        else:
            self._run_storage = PooledSqliteRunStorage.from_local(runs)
        self._event_log_storage = PooledSqliteEventLogStorage(_event_logs_directory(base_dir))
        if _stamped_file(os.path.join(schedules, "schedules.db"), "job_ticks"):
            self._schedule_storage = SqliteScheduleStorage(
                create_db_conn_string(schedules, "schedules")
            )
        else:
            self._schedule_storage = SqliteScheduleStorage.from_local(schedules)
        self._inst_data = inst_data
        super(DagsterSqliteStorage, self).__init__()

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> BenchSqliteStorage:
        mkdir_p(config_value["base_dir"])
        return cls(config_value["base_dir"], inst_data=inst_data)


def warm_sqlite_storage(instance: Any) -> None:
    """Answer now, once, what every run asks the instance's SQLite event log first (each is
    cached on the storage, so `bench serve`'s forked commands inherit the answers): whether
    pools are supported (a table lookup) and the index file's first connection (its
    initialisation check). Other storages (Postgres) are left as they are: their connections
    are not this module's to close before a fork."""
    storage = instance.event_log_storage
    if isinstance(storage, SqliteEventLogStorage):
        _ = storage.supports_global_concurrency_limits
        with storage.index_connection():
            pass


# --------------------------------------------------------------------------- new instances

# The files of a new instance under its base_dir, as Dagster's initialisation makes them, each
# with the table Dagster checks for beside the alembic revision.
TEMPLATE_TABLES = {
    os.path.join("history", "runs.db"): "instance_info",
    os.path.join("history", "runs", "index.db"): "event_logs",
    os.path.join("history", "runs", EMPTY_RUN_SHARD): "event_logs",
    os.path.join("schedules", "schedules.db"): "job_ticks",
}


def template_dir() -> str:
    """Where this machine keeps the files of a new instance of this Dagster version."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "bench_pipeline", f"dagster-{DAGSTER_VERSION}-instance")


def seed_new_instance(base_dir: str) -> bool:
    """Copy the template files into the new instance at `base_dir`; False when there are no
    templates and none can be made (the storages then initialise their files as Dagster does).
    A file another process created meanwhile is kept: every copy of a template is the same."""
    templates = instance_templates()
    if templates is None:
        return False
    for name in TEMPLATE_TABLES:
        target = os.path.join(base_dir, name)
        mkdir_p(os.path.dirname(target))
        # Not mkstemp: its file would be private (0600), Dagster's files follow the umask.
        tmp = os.path.join(os.path.dirname(target), f".seed-{os.getpid()}-{uuid.uuid4().hex}.db")
        try:
            shutil.copyfile(os.path.join(templates, name), tmp)
            os.link(tmp, target)  # never replaces a file another process just created
        except FileExistsError:
            pass
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return True


def instance_templates() -> str | None:
    """The folder of template files (made now, by Dagster's initialisation, when missing or
    incomplete); None when the cache folder cannot be written or read."""
    path = template_dir()
    if _complete(path):
        return path
    try:
        mkdir_p(os.path.dirname(path))
        build = tempfile.mkdtemp(prefix=".build-", dir=os.path.dirname(path))
    except OSError:
        return None
    try:
        storage = BenchSqliteStorage(build, seed=False)
        try:
            storage.event_log_storage._empty_run_shard()
        finally:
            storage.dispose()  # the last connection's close checkpoints each WAL into its file
        if not _complete(build):
            return None
        shutil.rmtree(path, ignore_errors=True)  # an incomplete one (a cache cleaned in part)
        try:
            os.rename(build, path)
        except OSError:  # another process put its templates there first: those are the same
            pass
    except (OSError, db.exc.DBAPIError):
        return None
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return path if _complete(path) else None


def _complete(folder: str) -> bool:
    """Whether `folder` holds every template, each stamped, checkpointed (no write-ahead log
    beside it) and with no instance id."""
    for name, table in TEMPLATE_TABLES.items():
        path = os.path.join(folder, name)
        if not os.path.exists(path) or os.path.exists(f"{path}-wal"):
            return False
        # Read as immutable: no lock taken and no -wal or -shm made beside a template that
        # other processes are copying.
        conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            if conn.execute("SELECT 1 FROM alembic_version LIMIT 1").fetchone() is None:
                return False
            if not conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone():
                return False
            if (
                table == "instance_info"
                and conn.execute("SELECT 1 FROM instance_info LIMIT 1").fetchone()
            ):
                return False
        except sqlite3.DatabaseError:
            return False
        finally:
            conn.close()
    return True
