"""The instance storage `bench` configures for a new DAGSTER_HOME: Dagster's SQLite files and
tables, with connections kept open. What it writes, Dagster's own SQLite storage reads (and
the other way round), and a run opens a handful of database connections, not one per
statement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from bench_pipeline_tests.conftest import run_bench

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
PLAIN_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"

# Counts the SQLite connections the whole `bench run` process opens.
COUNTING = """
import sqlite3, sqlite3.dbapi2 as dbapi2, sys
opened = [0]
real = dbapi2.connect
def connect(*args, **kwargs):
    opened[0] += 1
    return real(*args, **kwargs)
dbapi2.connect = sqlite3.connect = connect
from bench_pipeline.cli.main import main
code = main(sys.argv[1:])
print(f"SQLITE_CONNECTIONS {opened[0]}", file=sys.stderr)
sys.exit(code)
"""


def _run(launch: Path, home: Path) -> tuple[str, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home / "dagster_home")}
    argv = [sys.executable, "-c", COUNTING, "--home", str(home), "run", str(launch)]
    out = subprocess.run(
        [*argv, "--max", "1", "--repeats", "1", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    opened = int(out.stderr.rsplit("SQLITE_CONNECTIONS ", 1)[1].split()[0])
    return json.loads(out.stdout)["run"]["run_id"], opened


def _tiny_job() -> dg.JobDefinition:
    """One op that logs "hello": a run with a few events of its own."""

    @dg.op
    def hello(context) -> int:  # noqa: ANN001 - Dagster reads the annotation at run time
        context.log.info("hello")
        return 1

    @dg.job
    def tiny() -> None:
        hello()

    return tiny


def _instance(dagster_home: Path, yaml_text: str | None = None) -> dg.DagsterInstance:
    if yaml_text is not None:
        (dagster_home / "dagster.yaml").write_text(yaml_text)
    return dg.DagsterInstance.from_config(str(dagster_home))


def test_a_new_home_keeps_connections_open_and_dagster_reads_what_it_wrote(
    factory: Path, tmp_path: Path
) -> None:
    launch = factory / "launches" / "demo.yaml"
    pooled_home, plain_home = tmp_path / "pooled", tmp_path / "plain"
    (plain_home / "dagster_home").mkdir(parents=True)
    (plain_home / "dagster_home" / "dagster.yaml").write_text(PLAIN_YAML)
    # (a first home makes the machine's instance templates, once: counted here, that made the
    # figure depend on whether an earlier test had made them)
    _run(launch, tmp_path / "first")
    run_id, pooled = _run(launch, pooled_home)
    _, plain = _run(launch, plain_home)
    # Dagster's own storage opens the database for every statement; bench's keeps them open.
    assert pooled * 3 < plain, (pooled, plain)
    written = (pooled_home / "dagster_home" / "dagster.yaml").read_text()
    assert "bench_pipeline.defs.storage" in written and "BenchSqliteStorage" in written

    # Dagster's plain SQLite storage on the same files sees the run, its events and the
    # partitions' materializations.
    home = pooled_home / "dagster_home"
    instance = _instance(home, PLAIN_YAML)
    try:
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.SUCCESS and run.tags["bench/run_id"] == run_id
        keys = instance.get_materialized_partitions(dg.AssetKey("trials"))
        assert len(keys) == 3  # one partition per configuration of the demo
        assert instance.all_logs(run.run_id)
    finally:
        instance.dispose()

    # And the other way round: the plain storage's home is read (and written) by bench's.
    (home / "dagster.yaml").write_text(written)
    code, out, err = run_bench(
        "run", str(launch), "--max", "1", "--repeats", "1", "--json", home=pooled_home
    )
    assert code == 0, err
    instance = _instance(home)
    try:
        assert type(instance.run_storage).__name__ == "PooledSqliteRunStorage"
        assert len(instance.get_runs()) == 2
        assert instance.get_latest_materialization_event(dg.AssetKey("config_table"))
    finally:
        instance.dispose()


def test_reading_more_runs_than_the_open_files_kept_is_still_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event log keeps the newest few run files open: reading every run of a longer history
    (as the webserver and daemon do) closes the oldest and reopens them when asked again."""
    from bench_pipeline.defs.launcher import instance_yaml
    from bench_pipeline.defs.storage import OPEN_EVENT_LOG_FILES

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    tiny = _tiny_job()

    (home / "dagster.yaml").write_text(instance_yaml(home))
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert type(instance.event_log_storage).__name__ == "PooledSqliteEventLogStorage"
        runs = [
            tiny.execute_in_process(instance=instance).run_id
            for _ in range(OPEN_EVENT_LOG_FILES + 3)
        ]
        for _ in range(2):
            for run_id in runs:
                logs = instance.all_logs(run_id)
                assert any(e.user_message == "hello" for e in logs)
                assert instance.get_run_by_id(run_id).is_success
        open_files = instance.event_log_storage._engines
        assert len(open_files) == OPEN_EVENT_LOG_FILES + 1 and "index" in open_files
    finally:
        instance.dispose()


def test_a_forked_child_never_uses_the_parents_open_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A celery prefork worker or a forked step gets fresh pools: sharing an open SQLite
    connection across a fork can corrupt the database."""
    from bench_pipeline.defs.launcher import instance_yaml

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    (home / "dagster.yaml").write_text(instance_yaml(home))
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        instance.get_runs()  # opens connections to runs.db and returns them to the pool
        pool = instance.run_storage._pooled.pool
        held = pool.checkedin()
        assert held >= 1
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what its pool holds, then use it
            try:
                fresh = instance.run_storage._pooled.pool
                ok = fresh is not pool and fresh.checkedin() == 0
                instance.get_runs()
                os.write(write, b"fresh" if ok else b"inherited")
            finally:
                os._exit(0)
        os.close(write)
        seen = os.read(read, 64)
        os.waitpid(pid, 0)
        assert seen == b"fresh"
        # The parent closed its idle connections before the fork, and reopens on use.
        assert pool.checkedin() == 0 and instance.get_runs() == []
    finally:
        instance.dispose()


def _locks_of(pid: int, path: Path) -> list[str]:
    inode = os.stat(path).st_ino
    return [
        line.split()[3]
        for line in Path("/proc/locks").read_text().splitlines()
        if line.split()[4] == str(pid) and int(line.split()[5].split(":")[2]) == inode
    ]


def test_a_forked_childs_commits_survive_its_parent_leaving_and_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench serve` forks each command from a process whose instance was open. Were its
    SQLite connections still open at the fork, the child's copy of SQLite would believe it
    holds the file locks it does not (fcntl locks are not inherited), take none, and once the
    server is gone another process could checkpoint and delete the WAL the child writes to:
    the child's later commits would be lost."""
    import sqlalchemy as sa

    from bench_pipeline.defs.launcher import get_instance, prepare_instance
    from bench_pipeline.runs.paths import BenchPaths

    paths = BenchPaths.from_home(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(paths.home / "dagster_home"))
    prepare_instance(paths)  # as the server's warm-up does, on a new home
    runs_db = paths.home / "dagster_home" / "history" / "runs.db"
    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    pid = os.fork()
    if pid == 0:  # the served command
        try:
            os.close(to_parent)
            os.close(from_parent)
            engine = get_instance(paths).run_storage._pooled
            with engine.begin() as conn:
                conn.execute(sa.text("create table probe (x text)"))
                conn.execute(sa.text("insert into probe values ('before')"))
            os.write(from_child, b"ok" if _locks_of(os.getpid(), runs_db) else b"no locks")
            os.read(to_child, 1)  # the server has left, another process came and went
            with engine.begin() as conn:
                conn.execute(sa.text("insert into probe values ('after')"))
        finally:
            os._exit(0)  # as every served command ends
    os.close(from_child)  # (a child that failed early then reads as an empty answer)
    os.close(to_child)
    assert os.read(to_parent, 64) == b"ok"  # the child's open connection holds its locks
    get_instance(paths).dispose()  # the server leaves
    peek = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
        "print(c.execute('select x from probe').fetchall()); c.close()"
    )
    other = subprocess.run([sys.executable, "-c", peek, str(runs_db)], capture_output=True)
    assert other.returncode == 0, other.stderr
    os.write(from_parent, b"go")
    os.close(from_parent)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    after = subprocess.run(
        [sys.executable, "-c", peek, str(runs_db)], capture_output=True, text=True, check=True
    )
    assert after.stdout.strip() == "[('before',), ('after',)]"


def test_a_worker_without_dagster_home_loads_the_same_instance_from_a_runs_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A celery worker builds the instance from the run's InstanceRef, in its own environment:
    the storage's folder must not depend on that environment's DAGSTER_HOME."""
    from dagster._serdes import serialize_value

    from bench_pipeline.defs.launcher import ensure_dagster_home
    from bench_pipeline.runs.paths import BenchPaths

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = ensure_dagster_home(BenchPaths.from_home(tmp_path / "bench-home"))

    @dg.op
    def hello() -> int:
        return 1

    @dg.job
    def tiny() -> None:
        hello()

    instance = dg.DagsterInstance.from_config(str(home))
    try:
        run_id = tiny.execute_in_process(instance=instance).run_id
        ref = serialize_value(instance.get_ref())
    finally:
        instance.dispose()
    code = (
        "import sys, dagster as dg\n"
        "from dagster._serdes import deserialize_value\n"
        "instance = dg.DagsterInstance.from_ref(deserialize_value(sys.stdin.read()))\n"
        "print(type(instance.run_storage).__name__, instance.get_run_by_id(sys.argv[1]).status)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", code, run_id],
        input=ref,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["PooledSqliteRunStorage", "DagsterRunStatus.SUCCESS"]


def _schema(path: Path) -> tuple[list[tuple[str, str, str]], list[str], str]:
    """(every table, index and trigger with its SQL; the alembic revision; the journal mode)."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        objects = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 1, 2"
        ).fetchall()
        revision = [r for (r,) in conn.execute("SELECT version_num FROM alembic_version")]
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        return objects, revision, mode
    finally:
        conn.close()


def test_a_new_runs_event_log_is_the_file_dagster_would_make_without_loading_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run has its own event-log file. Dagster initialises it through alembic, which loads
    every migration script to find the head revision; bench copies an empty file made once by
    Dagster's own initialisation. The copy must be what Dagster makes: same tables, indexes,
    revision and WAL mode, read by Dagster's plain storage, and no migration loaded per run."""
    from alembic.script import ScriptDirectory

    from bench_pipeline.defs.launcher import instance_yaml

    tiny = _tiny_job()

    homes = {"plain": tmp_path / "plain", "bench": tmp_path / "bench"}
    (homes["plain"]).mkdir()
    (homes["plain"] / "dagster.yaml").write_text(PLAIN_YAML)
    homes["bench"].mkdir()
    (homes["bench"] / "dagster.yaml").write_text(instance_yaml(homes["bench"]))
    loaded: list[int] = []
    real = ScriptDirectory.from_config.__func__

    def counting(cls, config):  # noqa: ANN001, ANN202 - alembic's own signature
        loaded.append(1)
        return real(cls, config)

    run_ids: dict[str, list[str]] = {}
    for name, home in homes.items():
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        instance = dg.DagsterInstance.from_config(str(home))
        try:
            run_ids[name] = [tiny.execute_in_process(instance=instance).run_id]
            if name == "bench":  # the empty file exists now: later runs copy it
                monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(counting))
                run_ids[name] += [tiny.execute_in_process(instance=instance).run_id for _ in "ab"]
                monkeypatch.undo()
        finally:
            instance.dispose()
    assert loaded == []  # two runs, two new event-log files, no migration script loaded

    plain_file = homes["plain"] / "history" / "runs" / f"{run_ids['plain'][0]}.db"
    expected = _schema(plain_file)
    assert expected[1] and expected[2] == "wal"
    for run_id in run_ids["bench"]:
        path = homes["bench"] / "history" / "runs" / f"{run_id}.db"
        assert _schema(path) == expected
        assert path.stat().st_mode & 0o777 == plain_file.stat().st_mode & 0o777
    # Dagster's plain storage reads every run bench wrote, with its events.
    instance = _instance(homes["bench"], PLAIN_YAML)
    try:
        for run_id in run_ids["bench"]:
            assert instance.get_run_by_id(run_id).is_success
            assert any(e.user_message == "hello" for e in instance.all_logs(run_id))
        # Dagster lists runs by their files: the empty one beside them is not a run.
        assert sorted(instance.event_log_storage.get_all_run_ids()) == sorted(run_ids["bench"])
    finally:
        instance.dispose()


def test_a_prepared_instance_is_not_reused_once_its_history_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench serve` keeps the home's instance open for its commands; a user who clears the
    run history (keeping dagster.yaml) gets an instance that makes its tables again."""
    import shutil

    from bench_pipeline.defs.launcher import get_instance, prepare_instance
    from bench_pipeline.runs.paths import BenchPaths

    paths = BenchPaths.from_home(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(paths.home / "dagster_home"))
    prepare_instance(paths)
    prepared = get_instance(paths)
    assert get_instance(paths) is prepared  # reused while its files are as they were
    prepared.dispose()
    shutil.rmtree(paths.home / "dagster_home" / "history")
    fresh = get_instance(paths)
    try:
        assert fresh is not prepared
        assert fresh.get_runs() == []
    finally:
        fresh.dispose()


def test_an_existing_home_is_opened_without_loading_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every `bench` process opens the home's index file, and Dagster checks it through alembic
    (every migration script loaded, ~0.05 s) although it only ever makes the tables of a file
    without a revision. bench checks the revision itself: a later process loads no script, and
    a file without one (an empty index left by a crash) still gets Dagster's tables."""
    import sqlite3

    from alembic.script import ScriptDirectory

    from bench_pipeline.defs.launcher import instance_yaml

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    tiny = _tiny_job()
    first = _instance(home)
    try:
        first_run = tiny.execute_in_process(instance=first).run_id
    finally:
        first.dispose()

    loaded: list[int] = []
    real = ScriptDirectory.from_config.__func__

    def counting(cls, config):  # noqa: ANN001, ANN202 - alembic's own signature
        loaded.append(1)
        return real(cls, config)

    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(counting))
    later = _instance(home)  # a later process: nothing of the first one's state
    try:
        run_id = tiny.execute_in_process(instance=later).run_id
        assert any(e.user_message == "hello" for e in later.all_logs(first_run))
        assert any(e.user_message == "hello" for e in later.all_logs(run_id))
    finally:
        later.dispose()
    assert loaded == []
    monkeypatch.undo()

    history = home / "history"
    files = [
        history / "runs" / "index.db",
        history / "runs.db",
        home / "schedules" / "schedules.db",
    ]
    for path in files:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.touch()  # there, but with no table and no revision
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    again = _instance(home)
    try:
        assert tiny.execute_in_process(instance=again).success
        assert len(again.get_runs()) == 1
    finally:
        again.dispose()
    for path in files:
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall(), path
        finally:
            conn.close()


def _markers(path: Path) -> list[str]:
    """The data migrations Dagster marked done in a file (its `secondary_indexes` rows)."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return sorted(name for (name,) in conn.execute("SELECT name FROM secondary_indexes"))
    finally:
        conn.close()


def test_a_new_home_starts_from_dagsters_own_files_made_once_per_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new DAGSTER_HOME costs Dagster's initialisation of four files through alembic (~0.3 s of
    a new home's first command). bench copies templates that the same initialisation made once
    in the user's cache: no migration script is loaded for a second new home, its files are
    what Dagster's plain storage makes (tables, indexes, revision, WAL, migration markers), no
    two homes share an instance id, and where the cache cannot be written a new home is
    initialised by Dagster as before."""
    from alembic.script import ScriptDirectory

    from bench_pipeline.defs.launcher import instance_yaml
    from bench_pipeline.defs.storage import TEMPLATE_TABLES, template_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tiny = _tiny_job()

    def bench_home(name: str) -> Path:
        home = tmp_path / name
        home.mkdir()
        (home / "dagster.yaml").write_text(instance_yaml(home))
        return home

    def one_run(home: Path, yaml_text: str | None = None) -> tuple[str, str]:
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        instance = _instance(home, yaml_text)
        try:
            run_id = tiny.execute_in_process(instance=instance).run_id
            return run_id, instance.run_storage.get_run_storage_id()
        finally:
            instance.dispose()

    first_id = one_run(bench_home("first"))[1]  # the machine's first new home makes them
    templates = Path(template_dir())
    assert templates.is_relative_to(tmp_path / "cache")
    assert all((templates / name).is_file() for name in TEMPLATE_TABLES)

    loaded: list[int] = []
    real = ScriptDirectory.from_config.__func__

    def counting(cls, config):  # noqa: ANN001, ANN202 - alembic's own signature
        loaded.append(1)
        return real(cls, config)

    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(counting))
    second = bench_home("second")
    run_id, second_id = one_run(second)
    monkeypatch.setattr(ScriptDirectory, "from_config", classmethod(real))
    assert loaded == []  # a new home, a run, and no migration script loaded
    assert len({first_id, second_id}) == 2  # Dagster drew each instance's id itself

    plain = tmp_path / "plain"
    plain.mkdir()
    one_run(plain, PLAIN_YAML)
    for name in ("history/runs.db", "history/runs/index.db", "schedules/schedules.db"):
        assert _schema(second / name) == _schema(plain / name), name
        assert _markers(second / name) == _markers(plain / name), name
        assert _schema(second / name)[2] == "wal"
    instance = _instance(second, PLAIN_YAML)  # Dagster's plain storage reads the new home
    try:
        assert instance.get_run_by_id(run_id).is_success
        assert any(e.user_message == "hello" for e in instance.all_logs(run_id))
    finally:
        instance.dispose()

    # A cache folder that cannot be made (its parent is a file): Dagster initialises the files.
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder" / "cache"))
    fallback = bench_home("fallback")
    run_id, _ = one_run(fallback)
    assert _schema(fallback / "history" / "runs.db") == _schema(plain / "history" / "runs.db")
    instance = _instance(fallback, PLAIN_YAML)
    try:
        assert instance.get_run_by_id(run_id).is_success
    finally:
        instance.dispose()


def test_commits_are_not_synced_to_disk_one_by_one(tmp_path: Path) -> None:
    """The run history and event logs commit with synchronous=NORMAL in WAL mode (durable as
    the warehouse's files: storage.py says why); Dagster's plain storage keeps SQLite's FULL."""
    import sqlalchemy as db

    from bench_pipeline.defs.launcher import instance_yaml

    def synchronous(conn: db.Connection) -> tuple[int, str]:
        (level,) = conn.execute(db.text("PRAGMA synchronous")).fetchone()
        (mode,) = conn.execute(db.text("PRAGMA journal_mode")).fetchone()
        return level, mode

    homes = {"bench": tmp_path / "bench", "plain": tmp_path / "plain"}
    for name, home in homes.items():
        home.mkdir()
        (home / "dagster.yaml").write_text(instance_yaml(home) if name == "bench" else PLAIN_YAML)
    seen = {}
    for name, home in homes.items():
        instance = _instance(home)
        try:
            run_id = _tiny_job().execute_in_process(instance=instance).run_id
            with instance.run_storage.connect() as conn:
                runs = synchronous(conn)
            with instance.event_log_storage.index_connection() as conn:
                index = synchronous(conn)
            with instance.event_log_storage.run_connection(run_id) as conn:
                events = synchronous(conn)
            seen[name] = (runs, index, events)
        finally:
            instance.dispose()
    assert seen["bench"] == ((1, "wal"),) * 3  # 1: NORMAL
    assert seen["plain"] == ((2, "wal"),) * 3  # 2: FULL, SQLite's default


# Claims a slot of the trial pool in the instance of DAGSTER_HOME, as a run's step does.
CLAIM = """
import sys
sys.path.insert(0, sys.argv[1])
import dagster as dg
storage = dg.DagsterInstance.get().event_log_storage
status = storage.claim_concurrency_slot("bench_trials", "run-b", "trials")
print(status.slot_status.value if status.slot_status else "no slot")
"""


def _waiting_on(lock: Path, pid: int) -> bool:
    """Whether `pid` waits for an flock of `lock`: a `->` line of /proc/locks (`N: -> FLOCK
    ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF`)."""
    inode = str(lock.stat().st_ino)
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1:3] == ["->", "FLOCK"] and fields[5] == str(pid):
            if fields[6].split(":")[-1] == inode:
                return True
    return False


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/locks")
def test_a_claim_of_a_pool_slot_waits_while_another_process_changes_the_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changes to the pools are made one process at a time: a claim of a slot waits while
    another process changes the pools (holds their lock file), then is made. Dagster's SQL
    storage reads the free slots and then writes, outside one transaction on SQLite: two
    `bench run`s starting together both ran in a pool of one slot."""
    import fcntl
    import time

    from bench_pipeline.defs.launcher import get_instance
    from bench_pipeline.defs.storage import POOL_LOCK
    from bench_pipeline.runs.paths import BenchPaths

    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster_home"))
    env = dict(os.environ)
    instance = get_instance(BenchPaths.from_home(home))
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default("bench_trials")
    assert storage.get_concurrency_info("bench_trials").slot_count == 1
    lock = Path(storage._base_dir) / POOL_LOCK  # (Dagster's folder of the event logs)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as another process changing the pools does
        child = subprocess.Popen(
            [sys.executable, "-c", CLAIM, str(ROOT)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120  # (only a bound: the wait is seen, not timed)
        while not _waiting_on(lock, child.pid):
            assert child.poll() is None, "the claim was made without the pools' lock"
            assert time.monotonic() < deadline, "the claim never waited for the lock"
            time.sleep(0.05)
        assert storage.get_concurrency_info("bench_trials").claimed_slots == []
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and out.strip() == "CLAIMED"
    claimed = storage.get_concurrency_info("bench_trials").claimed_slots
    assert [(c.run_id, c.step_key) for c in claimed] == [("run-b", "trials")]
    instance.dispose()
