"""The warehouse: Parquet tables under one root, and a DuckDB file with a view per table.

Layout: `<root>/<table>/<run_id>/<part>.parquet`. Every write is a new file moved into place
atomically (write to a temp name, then `os.replace`), so a crash never leaves half a table and
no run's rows are ever rewritten by another run. Readers glob the files through DuckDB.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.files import installed_program, replace_text, replacing
from bench_pipeline.formats.serialize import readable_json

if TYPE_CHECKING:  # pyarrow, pandas and DuckDB load on the first read or write, not at import
    import pandas as pd
    import pyarrow as pa

log = logging.getLogger(__name__)

# Tables with a fixed schema; derived tables take the schema of the frame written.
SCHEMA_NAMES = {
    "runs": "RUNS",
    "trials": "TRIALS",
    "scores": "SCORES",
    "check_results": "CHECK_RESULTS",
    "test_results": "TEST_RESULTS",
}
_SAFE = re.compile(r"[^A-Za-z0-9_.=-]")
SMALL_READ_FILES = 200
# `bench.duckdb` holds only views; written at this storage version so that the DuckDB shell
# installed beside the package (duckdb-cli, pinned in pyproject.toml) opens it.
DUCKDB_STORAGE_VERSION = "v1.5.0"


class CorruptFileError(BenchInputError):
    """A warehouse file that cannot be read (truncated by a full disk, edited, ...): Parquet,
    whose rows its run loses once it is moved aside, or JSON (a run's manifest or status)."""

    def __init__(self, path: Path, cause: BaseException, kind: str = "Parquet"):
        text = str(cause).replace(f"'{path}'", "").replace(str(path), "")
        first = (text.strip().splitlines() or [type(cause).__name__])[0][:120]
        loses = "its run loses those rows" if kind == "Parquet" else "what it records is lost"
        super().__init__(
            str(path),
            None,
            f"not a readable {kind} file ({first}); move it aside to recover "
            f"(`mv {path} {path}.corrupt`): {loses}, every other file is intact",
        )


def table_schema(table: str) -> pa.Schema | None:
    """The fixed schema of `table`, or None for a derived table (it takes the frame's)."""
    name = SCHEMA_NAMES.get(table)
    if name is None:
        return None
    from bench_pipeline.warehouse import schemas

    return getattr(schemas, name)


class VanishedFileError(BenchInputError):
    """A file listed, then gone before it was read: a partition's files joined into one
    (`trial_rows.join_partition`) or a resumed trial's rows dropped meanwhile. A reader that
    lists the files itself lists them again (`LIST_AGAIN` times); this is raised when they
    keep changing."""

    def __init__(self, path: Path):
        super().__init__(
            str(path),
            None,
            "listed, then replaced before it was read (its run is being written right now); "
            "run the command again",
        )


T = TypeVar("T")

# How many times a reader lists a run's files when one it listed was replaced before it read
# it (a partition's files are joined once, at the end of its trials: twice in a row is rare).
LIST_AGAIN = 3


def listing_again(read: Callable[[], T]) -> T:
    """`read()`, a read that lists a run's files itself, run again on a fresh listing when a
    file it listed was replaced before it was read (VanishedFileError): `LIST_AGAIN` times
    in all, the last one's error raised."""
    for _ in range(LIST_AGAIN - 1):
        try:
            return read()
        except VanishedFileError:
            continue
    return read()


def _first_vanished(files: Iterable[Path]) -> Path | None:
    return next((f for f in files if not os.path.lexists(f)), None)


def vanished(files: Iterable[Path]) -> bool:
    """Whether any of `files` (listed a moment ago) no longer exists."""
    return _first_vanished(files) is not None


def raise_if_vanished(files: Iterable[Path], cause: BaseException) -> None:
    """Raise VanishedFileError for the first of `files` gone since they were listed, when one
    is (the read's error `cause` came from that, not from a damaged file)."""
    gone = _first_vanished(files)
    if gone is not None:
        raise VanishedFileError(gone) from cause


# The columns that name a row, in every table that has them: never null in a file of that
# table. A read fills a column a file lacks with nulls (as for a column added since the file
# was written), so a file without them (another table's, another program's) would read as rows
# of no run, no trial: it is not readable as that table.
KEY_COLUMNS = ("run_id", "trial_id")


def key_columns(names: Iterable[str]) -> list[str]:
    """The key columns among `names` (a table's columns, or a read's)."""
    names = set(names)
    return [c for c in KEY_COLUMNS if c in names]


def _unreadable_why(path: Path, keys: Iterable[str] = ()) -> Exception | None:
    """Why `path` is not a whole Parquet file (footer and schema readable) with the columns
    `keys`, or None when it is."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
    except Exception as exc:
        return exc
    missing = [k for k in keys if k not in names]
    return NotThisTableError(missing) if missing else None


class NotThisTableError(ValueError):
    """A whole Parquet file without the key columns of the table it is filed under."""

    def __init__(self, missing: Sequence[str]):
        super().__init__(f"no {', '.join(missing)} column: a file of another table")


def _readable(path: Path, keys: Iterable[str] = ()) -> bool:
    """Whether `path` is a whole Parquet file (footer and schema readable) with the columns
    `keys` (a table's key columns)."""
    return _unreadable_why(path, keys) is None


def corrupt_cause(path: Path, keys: Iterable[str], exc: BaseException) -> BaseException:
    """What a CorruptFileError of `path` says: the columns it lacks, else the read's error."""
    why = _unreadable_why(path, keys)
    return why if isinstance(why, NotThisTableError) else exc


def check_keys(data: pa.Table | pa.RecordBatch | pd.DataFrame, files: Sequence[Path]) -> None:
    """Raise CorruptFileError naming the first of `files` (those `data` was read from) that
    lacks a key column `data` holds a null in (a file without it reads it as nulls)."""
    if hasattr(data, "column_names"):  # (Arrow: null counts are known, nothing is scanned)
        keys = [c for c in key_columns(data.column_names) if data.column(c).null_count]
    else:
        keys = [c for c in key_columns(data.columns) if data[c].isna().any()]
    if not keys:
        return
    for path in files:
        why = _unreadable_why(path, keys)
        if why is not None:
            raise CorruptFileError(path, corrupt_cause(path, keys, why)) from None


def _empty(schema: pa.Schema | None) -> pd.DataFrame:
    """No file yet: an empty frame with the schema's columns."""
    if schema is not None:
        return schema.empty_table().to_pandas()
    import pandas as pd

    return pd.DataFrame()


# Small Parquet files read before, by identity. A warehouse file is never rewritten in place
# (a write is a new file renamed over the old one: a new inode, new ctime), so (inode, size,
# mtime, ctime) names its content — and this process's own writes drop their entry outright; a partition's files are read several times per step (done trials, the rows to
# show, the rows to grade) and each read of a one-row file costs ~1-2 ms of footer parsing.
_SMALL_FILE_BYTES = 256 * 1024
_CACHE_ENTRIES = 4096
_cache: OrderedDict[tuple[str, int, int, int, int, int], pa.Table] = OrderedDict()
_cache_lock = threading.Lock()


def _small_table(path: Path, schema: pa.Schema) -> pa.Table:
    import pyarrow.parquet as pq

    st = path.stat()
    if st.st_size > _SMALL_FILE_BYTES:
        return pq.read_table(path, schema=schema)
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, id(schema))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    table = pq.read_table(path, schema=schema)
    with _cache_lock:
        _cache[key] = table
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return table


def _forget(path: Path) -> None:
    with _cache_lock:
        for key in [k for k in _cache if k[0] == str(path)]:
            del _cache[key]


def _to_arrow(table: str, rows: Iterable[dict[str, Any]] | pd.DataFrame) -> pa.Table:
    import pyarrow as pa

    schema = table_schema(table)
    if schema is not None and isinstance(rows, list | tuple):
        # Row dicts straight into the schema (missing keys null, extra keys dropped, as below):
        # ~10x cheaper than through a DataFrame, and every finished trial writes its rows.
        try:
            return pa.Table.from_pylist(list(rows), schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            pass  # values only pandas coerces (numpy scalars in an int column, ...)
    import pandas as pd

    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if schema is None:
        return _from_pandas(frame, None)
    for name in schema.names:
        if name not in frame.columns:
            frame[name] = None
    return _from_pandas(frame[schema.names], schema)


def _from_pandas(frame: pd.DataFrame, schema: pa.Schema | None) -> pa.Table:
    """`frame` as an Arrow table whose pandas metadata pandas can read back: a column of a
    nested Arrow dtype (e.g. the grid's lists of trial ids) is recorded as an object column,
    as the same lists held as Python objects would be (pandas cannot parse the name of a
    nested Arrow dtype, `list<item: string>[pyarrow]`, and a read of the file would fail; a
    flat one, `int64[pyarrow]`, it reads back as it was)."""
    import json

    import pandas as pd
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    arrow_typed = {
        str(c)
        for c in frame.columns
        if isinstance(frame[c].dtype, pd.ArrowDtype)
        and pa.types.is_nested(frame[c].dtype.pyarrow_dtype)
    }
    meta = table.schema.metadata or {}
    if not arrow_typed or b"pandas" not in meta:
        return table
    pandas_meta = json.loads(meta[b"pandas"])
    for column in pandas_meta.get("columns", []):
        if column.get("name") in arrow_typed:
            column["numpy_type"] = "object"
    return table.replace_schema_metadata({**meta, b"pandas": json.dumps(pandas_meta).encode()})


def _safe(part: str) -> str:
    return _SAFE.sub("_", part)


class Warehouse:
    def __init__(self, root: str | Path):
        root = str(root)
        if "://" in root and not root.startswith("file://"):
            # Object stores need fsspec/UPath wiring that is not part of this build; refusing is
            # better than silently writing to a local folder named "s3:".
            raise ValueError(f"warehouse root {root!r}: only local folders are supported so far")
        self.root = Path(root.removeprefix("file://")).absolute()

    # ------------------------------------------------------------------ writing

    def write(
        self, table: str, rows: Iterable[dict[str, Any]] | pd.DataFrame, run_id: str, part: str
    ) -> Path:
        """Write rows as `<table>/<run_id>/<part>.parquet`, atomically. Replaces only that part."""
        arrow = _to_arrow(table, rows)
        target = self.part_path(table, run_id, part)
        target.parent.mkdir(parents=True, exist_ok=True)
        import pyarrow.parquet as pq

        with replacing(target) as tmp:
            pq.write_table(arrow, tmp)
        _forget(target)
        return target

    def part_path(self, table: str, run_id: str, part: str) -> Path:
        """Where `write(table, rows, run_id, part)` puts its file."""
        segments = [_safe(s) for s in part.split("/") if s not in ("", ".", "..")]
        return self.root / table / _safe(run_id) / Path(*segments[:-1]) / f"{segments[-1]}.parquet"

    def drop_rows(self, path: Path, table: str, column: str, values: set[Any]) -> int:
        """Rewrite one file of `table` without the rows whose `column` is in `values`
        (atomically; the file goes when no row is left). 1 when it changed, else 0."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        schema = table_schema(table)
        data = pq.read_table(path, schema=schema)
        keep = pc.fill_null(
            pc.invert(pc.is_in(data[column], value_set=pa.array(sorted(values)))), True
        )
        if pc.all(keep).as_py():
            return 0
        rest = data.filter(keep)
        if rest.num_rows == 0:
            path.unlink()
        else:
            with replacing(path) as tmp:
                pq.write_table(rest, tmp)
        _forget(path)
        return 1

    def write_json(self, relpath: str, data: Any) -> Path:
        return self.write_text(relpath, readable_json(data))

    def write_text(self, relpath: str, text: str) -> Path:
        """Atomically (temp file + rename) write a text file under the root."""
        target = self.root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        return replace_text(target, text)

    def read_json(self, relpath: str) -> Any:
        path = self.root / relpath
        try:  # (written whole, by rename: a file that does not parse was damaged since)
            return json.loads(path.read_bytes())
        except ValueError as exc:  # (not JSON, or not UTF-8)
            raise CorruptFileError(path, exc, kind="JSON") from None
        except IsADirectoryError as exc:
            raise CorruptFileError(path, ValueError(exc.strerror), kind="JSON") from None

    def exists(self, relpath: str) -> bool:
        return (self.root / relpath).exists()

    # ------------------------------------------------------------------ reading

    def folder(self, table: str, run_id: str | None = None, under: str | None = None) -> Path:
        """The folder of `table` (of one run, and of one sub-folder of it)."""
        base = self.root / table
        if run_id is not None:
            base = base / _safe(run_id)
            if under:
                base = base.joinpath(*(_safe(s) for s in under.split("/") if s))
        return base

    def files(self, table: str, run_id: str | None = None, under: str | None = None) -> list[Path]:
        """The Parquet files of `table` (of one run, of one sub-folder of it), in path order."""
        return [Path(path) for path, _ in self._walk(table, run_id, under, stat=False)]

    def listed(
        self, table: str, run_id: str | None = None, under: str | None = None
    ) -> list[tuple[str, os.stat_result]]:
        """`files` as text, each with its `os.stat` as the listing found it.

        One `os.scandir` walk: at a million trials a run has tens of thousands of files, and
        `Path.glob` then a `stat` per path cost ~50 us a file in Python objects (2.9 s of a
        3.0 s analysis that found its cache current, at 60,000 files). Directory entries carry
        the file type, so the walk costs one `stat` call per file, and the paths stay text
        (a `Path` costs ~5 us more a file) for a caller that may need only their stats. A file
        removed between the directory read and its `stat` is left out: it is gone."""
        return self._walk(table, run_id, under, stat=True)

    def _walk(
        self, table: str, run_id: str | None, under: str | None, *, stat: bool
    ) -> list[tuple[str, Any]]:
        found: list[tuple[str, os.stat_result | None]] = []
        _walk_parquet(str(self.folder(table, run_id, under)), found, stat)
        return found

    def read(
        self,
        table: str,
        run_id: str | None = None,
        where: str | None = None,
        under: str | None = None,
    ) -> pd.DataFrame:
        """All rows of `table` (optionally of one run, and of one sub-folder of it such as a
        partition "<config>/rep<N>") as a DataFrame; empty with the schema's columns when
        nothing was written yet."""
        schema = table_schema(table)
        for attempt in range(LIST_AGAIN):
            files = self.files(table, run_id, under)
            if not files:
                return _empty(schema)
            try:
                return self._read_files(files, schema, where)
            except Exception as exc:
                if attempt + 1 < LIST_AGAIN and vanished(files):
                    continue  # (joined or dropped since listed: list them again)
                raise_if_vanished(files, exc)
                return self._unreadable(files, schema, where, run_id, exc)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _unreadable(
        self,
        files: list[Path],
        schema: pa.Schema | None,
        where: str | None,
        run_id: str | None,
        exc: Exception,
    ) -> pd.DataFrame:
        """A read of `files` failed with `exc`: a damaged file is named (refused for one run,
        left out with a warning across runs); any other error is raised as it was."""
        keys = key_columns(schema.names) if schema is not None else []
        bad = [f for f in files if not _readable(f, keys)]
        if not bad:
            raise exc
        if run_id is not None:
            raise CorruptFileError(bad[0], corrupt_cause(bad[0], keys, exc)) from None
        # Across runs, one damaged file must not hide every other run: leave it out and
        # say so (a read of that run itself refuses with the file named).
        for f in bad:
            log.warning("warehouse: skipped unreadable file %s (move it aside to recover)", f)
        return self.read_files_or_empty([f for f in files if f not in bad], schema, where)

    def read_files_or_empty(
        self, files: list[Path], schema: pa.Schema | None, where: str | None
    ) -> pd.DataFrame:
        if not files:
            return _empty(schema)
        return self._read_files(files, schema, where)

    def _read_files(
        self, files: list[Path], schema: pa.Schema | None, where: str | None
    ) -> pd.DataFrame:
        if schema is not None and where is None and len(files) <= SMALL_READ_FILES:
            # A partition's few small files: pyarrow alone is several times faster than a
            # DuckDB scan, and every partition step reads its own rows.
            import pyarrow as pa

            data = pa.concat_tables([_small_table(f, schema) for f in files])
            check_keys(data, files)
            return data.to_pandas()
        if schema is None and where is None and len(files) == 1:
            # One run's derived table is one file: its own schema and pandas metadata say
            # everything, and no query engine needs to be loaded to read it back.
            import pyarrow.parquet as pq

            return pq.read_table(files[0]).to_pandas()
        import duckdb

        con = duckdb.connect()
        try:
            sql = f"SELECT * FROM read_parquet({[str(f) for f in files]!r}, union_by_name=true)"
            if where:
                sql += f" WHERE {where}"
            frame = con.execute(sql).df()
        finally:
            con.close()
        if schema is not None:
            check_keys(frame, files)
        return frame

    def read_runs(self) -> pd.DataFrame:
        return self.read("runs")

    # ------------------------------------------------------------------ DuckDB views

    @property
    def duckdb_path(self) -> Path:
        return self.root / "bench.duckdb"

    def refresh_views(self) -> list[str]:
        """(Re)create one DuckDB view per table over its Parquet glob. Views read (and bind)
        the files at query time, so they stay current, new columns included, without being
        rewritten after every run: the file is rebuilt only when the set of tables changes.
        (Creating a view over `union_by_name` reads the schema of every file of the table, in
        every run: rebuilding it after each run cost time and ~45 MB that grew with the
        warehouse.)

        The file is for the DuckDB shell the install provides (`duckdb-cli`, beside the
        interpreter), so that shell writes it, in its own storage format: the harness never
        maps a second copy of DuckDB for it (~60 MB of its peak memory) and the file is
        readable by the shell whatever Python's duckdb writes. Without the shell, Python's
        duckdb writes it at the shell's storage version. Either way it is rebuilt beside and
        renamed into place (a reader never sees half of it).

        A table of fixed schema no file of which was written yet (`test_results` before a task
        with a `tests` criterion ran) gets an empty view of its columns, so that every
        documented query runs. Returns the tables that have files."""
        self.root.mkdir(parents=True, exist_ok=True)
        # (a hidden folder is no table: e.g. `.joining`, where a partition's files are joined)
        names = sorted(
            p.name
            for p in self.root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and any(p.glob("**/*.parquet"))
        )
        built = self.duckdb_path.with_name(f".{self.duckdb_path.name}.views")
        empty = sorted(set(SCHEMA_NAMES) - set(names))
        key = json.dumps(
            {"storage_version": DUCKDB_STORAGE_VERSION, "views": names, "empty": empty}
        )
        if self.duckdb_path.exists() and built.exists() and built.read_text() == key:
            return names
        statements = [
            f'CREATE VIEW "{name}" AS SELECT * FROM '
            f"read_parquet({_sql_text(str(self.root / name / '**' / '*.parquet'))}, "
            "union_by_name=true);"
            for name in names
        ]
        statements += [_empty_view(name, table_schema(name)) for name in empty]
        with replacing(self.duckdb_path) as tmp:
            try:
                _write_views(tmp, statements)
            finally:  # (an unclosed database's log, next to the temp file)
                tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)
        self.write_text(built.name, key)
        return names

    def query(self, sql: str) -> pd.DataFrame:
        import duckdb

        self.refresh_views()
        con = duckdb.connect(str(self.duckdb_path), read_only=True)
        try:
            return con.execute(sql).df()
        finally:
            con.close()


def _walk_parquet(folder: str, found: list[tuple[str, os.stat_result | None]], stat: bool) -> None:
    """Every `*.parquet` file under `folder` into `found`, as `sorted(Path.glob("**/*.parquet"))`
    finds them: sub-folders walked but not symlinked ones (no loop), an unreadable folder
    skipped, temp files (`.<name>.<uuid>.tmp`) not matched.

    Each folder's entries are visited in name order, depth first. That is the order of the
    paths' parts (how `sorted()` orders `Path` objects: "a/x" before "a-b/x", where text order
    puts "a-b/x" first), since every path under a folder shares its parts as a prefix; so no
    tuple of parts is built per file and no sort of the whole listing is needed (at 60,000
    files: 0.56 s a listing, against 0.64 s sorting it whole)."""
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError, PermissionError):  # (no such table yet)
        return
    with entries:
        listed = sorted(entries, key=_entry_name)
    for entry in listed:
        try:
            if entry.is_dir(follow_symlinks=False):
                _walk_parquet(entry.path, found, stat)
            elif entry.name.endswith(".parquet") and entry.is_file():
                found.append((entry.path, entry.stat() if stat else None))
        except FileNotFoundError:  # removed since the folder was read
            continue


def _entry_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _empty_view(name: str, schema: pa.Schema) -> str:
    columns = ", ".join(f'CAST(NULL AS {_sql_type(f.type)}) AS "{f.name}"' for f in schema)
    return f'CREATE VIEW "{name}" AS SELECT {columns} LIMIT 0;'


def _sql_type(arrow: pa.DataType) -> str:
    """The DuckDB type a Parquet column of Arrow type `arrow` reads as (the fixed schemas'
    types: warehouse/schemas.py)."""
    import pyarrow as pa

    if pa.types.is_list(arrow):
        return f"{_sql_type(arrow.value_type)}[]"
    if pa.types.is_timestamp(arrow):
        return "TIMESTAMPTZ" if arrow.tz else "TIMESTAMP"
    return {
        pa.string(): "VARCHAR",
        pa.bool_(): "BOOLEAN",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.float64(): "DOUBLE",
    }[arrow]


def duckdb_shell() -> str | None:
    """The DuckDB shell that writes the views file: `BENCH_DUCKDB_SHELL` when set (`none`:
    Python's duckdb writes it), else the one installed beside this interpreter (duckdb-cli),
    else one on PATH."""
    chosen = os.environ.get("BENCH_DUCKDB_SHELL")
    if chosen:
        return None if chosen == "none" else chosen
    return installed_program("duckdb")


def _write_views(path: Path, statements: list[str]) -> None:
    shell = duckdb_shell()
    if shell is not None:
        import subprocess

        try:
            proc = subprocess.run(
                [shell, "-bail", "-batch", str(path)],
                input="\n".join(statements),
                capture_output=True,
                text=True,
                timeout=300,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            proc = subprocess.CompletedProcess([shell], -1, "", str(exc))
        if proc.returncode == 0:
            return
        log.warning(
            "warehouse: the DuckDB shell could not write the views (%s); using Python's duckdb",
            (proc.stderr or proc.stdout).strip()[:300],
        )
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".wal").unlink(missing_ok=True)
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(
            f"ATTACH {_sql_text(str(path))} AS w (STORAGE_VERSION '{DUCKDB_STORAGE_VERSION}')"
        )
        con.execute("USE w")
        for statement in statements:
            con.execute(statement)
        con.execute("USE memory")
        con.execute("DETACH w")
    finally:
        con.close()
