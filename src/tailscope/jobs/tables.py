"""What both stores of the jobs tables share: the result of a write, and what tells a stored job from a new
version of it (a requeued job ran again: a new start, end, nodes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tailscope.history.written import Written

if TYPE_CHECKING:
    import pandas as pd

SIGNATURE = ("start_at", "end_at", "elapsed_s", "state", "nodelist", "nnodes", "cpus", "comment")


class WriteResult(Written):
    """What `jobs collect` stored."""

    PART = "jobs"
    NOUN = "jobs"
    UPDATED = "requeued or changed"


def signature(frame: pd.DataFrame) -> pd.Series:
    """One string per job: its key and the fields a new version would change."""
    import pandas as pd

    out = frame["cluster"].astype("string") + "\x00" + frame["job_id"].astype("string")
    for name in SIGNATURE:
        column = frame[name]
        if name.endswith("_at"):
            ns = pd.to_datetime(column, utc=True).astype("datetime64[us, UTC]").astype("int64")
            column = ns.where(column.notna(), -1)
        out = out + "\x00" + column.astype("string").fillna("\x01")  # a null is its own value, never NaN
    return out.astype(str)


def changes(incoming: pd.DataFrame, stored: pd.DataFrame) -> tuple[pd.Series, WriteResult]:
    """Which incoming jobs to write (a new key, or a changed version) and the counts."""
    import pandas as pd

    if incoming.empty:
        return pd.Series([], dtype=bool), WriteResult(0, 0, 0)
    known = set(zip(stored["cluster"].astype(str), stored["job_id"].astype(str), strict=True))
    same = set(signature(stored)) if not stored.empty else set()
    keys = zip(incoming["cluster"].astype(str), incoming["job_id"].astype(str), strict=True)
    is_new = pd.Series([k not in known for k in keys], index=incoming.index)
    unchanged = signature(incoming).isin(same)
    write = is_new | ~unchanged
    return write, WriteResult(int(is_new.sum()), int((~is_new & ~unchanged).sum()), int(unchanged.sum()))


def latest_jobs(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (cluster, job_id): the latest written version."""
    if frame.empty:
        return frame.reset_index(drop=True)
    frame = frame.sort_values("added_at", kind="stable")
    return frame.drop_duplicates(["cluster", "job_id"], keep="last").reset_index(drop=True)
