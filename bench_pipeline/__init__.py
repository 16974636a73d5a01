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


def _one_malloc_arena() -> None:
    """glibc's allocator gives each thread that allocates under contention an arena of its own
    (up to 8 per core) and keeps the freed pages of each. Arrow's reader threads decode a
    million trials' columns there, and a few buffers that live on pin pages in every arena:
    ~70 MiB at 25,000 tasks x 8 configs x 5, after `malloc_trim`. With one arena for every
    thread the freed pages are in one heap, where the next step reuses them: the peak RSS of
    a first analysis at that shape went 496-503 -> 486-490 MiB (4 fresh processes each), at
    50 x 8 x 2,500 395-407 -> 387-394 MiB, its time within the noise (Arrow allocates a few
    buffers per column of a batch, so its threads rarely wait on the arena's lock, and
    Python's own allocations hold the GIL anyway). Like the Arrow allocator above, it is set
    before any thread starts; a MALLOC_ARENA_MAX the user set is kept (glibc read it)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc only; elsewhere the allocator is its own
    except (OSError, AttributeError):
        return
    mallopt(-8, 1)  # M_ARENA_MAX (malloc.h): -8


_one_malloc_arena()
