"""bench_pipeline: replay a team's coding tasks under several agent configurations, grade every
trial the same way, and turn the results into decisions. See README.md."""

import os

__version__ = "0.1.0"

# Arrow's allocator, chosen here because pyarrow reads this once, when its default pool is first
# used, and this package is imported before pyarrow in every `bench` and Dagster process. The
# analysis sends its Arrow buffers to the system allocator anyway (`columns.system_memory_pool`);
# mimalloc, Arrow's default, then serves only the C++ paths that ask for the default pool
# directly (~2 MiB at a million trials), yet its arenas and per-thread segments added 35-50 MiB
# to the peak RSS of an analysis (perf/analysis.py: 448 -> 403 MiB at 50 x 8 x 2,500, 560 ->
# 524 MiB at 25,000 x 8 x 5) and page faults to its time. A value the user set is kept. (Agents
# and graders do not inherit it: their environment is built from an allow-list.)
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
