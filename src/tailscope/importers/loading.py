"""The one way importers write: a load that stages every chunk of one import and commits them at once.

TEMPORARY: this wraps `Campaign.write_shard` until the store's load path (`tailscope.store.load.load_into`)
lands on main; the importers already use the load's interface (write, claim_trials, add_plan), so switching
changes this module only. The duplicate rule lives here, one for every file format: a file whose content
(sha256) was imported into the campaign before is refused, naming the earlier import.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError
from tailscope.store.campaign import MANIFEST, Campaign, new_task_id


class ImportLoad:
    """One import's writes into one campaign."""

    def __init__(self, campaign: Campaign, fmt: str, path: Path, node: str | None) -> None:
        self.campaign = campaign
        self.format = fmt
        self.path = path
        self.node = node
        self.task = new_task_id()
        self.written: list[Path] = []
        self.plans: list[dict[str, Any]] = []
        self.changes: list[Callable[[dict[str, Any]], None]] = []
        self.digest: str | None = None
        self._claimed: dict[tuple[str, str], int] = {}
        self._variants: set[str] = set()

    @property
    def campaign_id(self) -> str:
        return self.campaign.campaign_id

    def write(self, table: str, data: pa.Table, *, node: str) -> None:
        if "task" in data.column_names:
            data = data.set_column(
                data.column_names.index("task"), "task", pa.array([self.task] * data.num_rows, pa.string())
            )
        chunk = len(self.written) + 1
        self.written.append(self.campaign.write_shard(table, data, node=node, task=self.task, chunk=chunk))

    def claim_trials(self, node: str, variant: str, count: int) -> list[int]:
        from tailscope.store.views import connect

        if variant not in self._variants:
            con = connect(self.campaign)
            try:
                rows = con.execute(
                    "SELECT node, max(trial) + 1 FROM runs_all WHERE variant = ? GROUP BY node", [variant]
                ).fetchall()
            finally:
                con.close()
            self._variants.add(variant)
            for stored_node, next_trial in rows:
                self._claimed[(stored_node, variant)] = int(next_trial)
        first = self._claimed.get((node, variant), 0)
        self._claimed[(node, variant)] = first + count
        return list(range(first, first + count))

    def add_plan(self, plan: dict[str, Any]) -> None:
        self.plans.append(plan)

    def update_manifest(self, change: Callable[[dict[str, Any]], None]) -> None:
        """A manifest change applied at commit (perfcounts' header scalars)."""
        self.changes.append(change)

    def check_not_imported(self, digest: str) -> None:
        """Refuse a file whose content this campaign already holds (any format, any node)."""
        for record in self.campaign.manifest.get("imports", []):
            if record.get("sha256") == digest:
                raise ImportInputError(
                    f"{self.path}: this file's content was already imported into {self.campaign.root} "
                    f"({record.get('format')} {record.get('file')!r} as node {record.get('node')}); "
                    "importing it again would store the same measurement twice"
                )
        self.digest = digest

    def _commit(self) -> None:
        for plan in self.plans:
            self.campaign.add_plan(plan)
        for change in self.changes:
            self.campaign.update_manifest(change)
        if self.digest is not None:
            record = {"sha256": self.digest, "format": self.format, "file": self.path.name, "node": self.node}
            self.campaign.update_manifest(lambda m: m.setdefault("imports", []).append(record))


@contextlib.contextmanager
def import_load(campaign_dir: Path, fmt: str, path: Path, *, node: str | None) -> Iterator[ImportLoad]:
    """Open (or create) the campaign, yield the load; on any exception remove what it wrote."""
    root = Path(campaign_dir)
    created = not (root / MANIFEST).exists()
    campaign = Campaign.open_or_create(root)
    load = ImportLoad(campaign, fmt, Path(path), node)
    try:
        yield load
        load._commit()
    except BaseException:
        for shard in load.written:
            shard.unlink(missing_ok=True)
        if created:
            (root / MANIFEST).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                shutil.rmtree(root / "shards")
                root.rmdir()
        raise


def stored_count(campaign_dir: Path, sql: str, params: list[Any]) -> int:
    """One count over the campaign's views (0 when there is no campaign yet)."""
    from tailscope.store.views import connect

    root = Path(campaign_dir)
    if not (root / MANIFEST).exists():
        return 0
    con = connect(Campaign.open(root))
    try:
        row = con.execute(sql, params).fetchone()
    finally:
        con.close()
    return int(row[0]) if row and row[0] is not None else 0


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return digest.hexdigest()
