"""Where state lives, as a Dagster resource: the only source of paths for every asset."""

import dagster as dg

from bench_pipeline.runs.paths import BenchPaths, default_home


class BenchResource(dg.ConfigurableResource):
    """`home` holds evidence, workspaces and (by default) the warehouse; `warehouse_root` may
    point the Parquet tables elsewhere. Both default from BENCH_HOME (else ./.bench)."""

    home: str = ""
    warehouse_root: str = ""
    progress: bool = False  # one line per finished trial on stderr (the CLI turns it on)

    @property
    def paths(self) -> BenchPaths:
        return BenchPaths.from_home(self.home or default_home(), self.warehouse_root or None)
