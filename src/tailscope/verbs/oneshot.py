"""A process that runs one read-only command and ends: no cyclic garbage collection, no teardown.

Verbs that only read a campaign and write their output before they return (cli.READ_ONLY_VERBS) end
without the interpreter's teardown (freeing pandas', pyarrow's and DuckDB's objects one by one: 0.1 s, a
fifth of `analyze` on a small campaign). Verbs that run probes, hold claims or start processes end normally.
"""

from __future__ import annotations


def one_shot_gc() -> None:
    """No cyclic garbage collection in one read-only command (issue 11): its memory is freed at exit.

    Measured with gc.callbacks: `analyze --json` of 1,000 nodes spent 82-105 ms in 311 collections,
    `report` 149-166 ms, `analyze` of 5,000 nodes 578 ms in 861. Each older collection walks every object
    alive, the imported pandas/pyarrow/tailscope modules most of them, and what the analysis builds is
    acyclic (freed by reference counts). With a young-collection threshold of 50,000 instead of 700 and the
    modules frozen (gc.freeze), 44-48 ms were left, in two collections: one during the imports, one over the
    50,000 run verdicts. Disabled, peak memory is the same (/usr/bin/time: 277 MB, 310 MB and 835 MB for the
    three commands above). The modules are still frozen out of any explicit gc.collect() a library makes.
    Only for a process that ends after the command: `main` called in-process (tests) keeps Python's GC.
    """
    import gc

    gc.disable()
    import tailscope.verbs.workflow  # noqa: F401  (pandas, pyarrow, numpy and the analysis: what the verb loads)

    gc.freeze()


def prepare_process() -> None:
    """Before anything is imported: Arrow's buffers from the C library's malloc, not mimalloc (pyarrow's
    default), unless the user chose: freed column buffers go back to the system, so `analyze` of 1,000 nodes
    peaks 20 MiB lower at the same speed (issue 11). Read by pyarrow when it is first imported."""
    import os

    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
