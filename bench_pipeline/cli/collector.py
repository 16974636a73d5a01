"""Python's cyclic garbage collector, paused while a command imports what it needs.

A one-trial `bench run` builds ~380,000 objects while it imports Dagster, SQLAlchemy, pandas
and pyarrow and opens its Dagster instance: modules, classes and functions that live as long as
the process. The collector's full passes over that growing heap took 0.24 s of the run's ~1.5 s
(4 passes of 14-95 ms, timed with `gc.callbacks`) and its young passes another 0.07 s, to
free the few cycles the imports leave behind (below). So the console script starts
with the collector off and a command turns it back on where its imports are done: `resume`
moves every object alive then into the permanent generation (`gc.freeze`: never scanned again,
and in `bench serve` not copied into each forked child by a scan) and collects as usual from
there, so a long run's garbage is collected as it always was.
(`formats.serialize.collector_paused` holds it off the same way around one large document,
and leaves it off when it found it off.)

What `resume` freezes that is already garbage stays allocated: those cycles, 1,398 objects of
the 377,280 alive when a one-trial run resumes (`gc.collect()` at that point), where each full
pass the freeze saves would scan all of them.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop the collector until `resume` (no-op if something else already turned it off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what is alive and collect again, if `pause` stopped the collector; else nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
