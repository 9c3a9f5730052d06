"""The campaign manifest (`campaign.json`), typed and validated on load.

Nothing outside `store/` reads the raw JSON: every reader gets a `Manifest` whose every field has been
checked, and every wrong shape is refused with the file, the key and what was expected.

    {
      "format": "tailscope-campaign", "schema_version": 2, "campaign_id": "<32 hex>", "name": "...",
      "created": "2026-11-24T16:30:00+00:00", "tool_version": "0.1.0",
      "plans": [{"variant": "l2sum-1a2b3c4d", "probe": "l2sum", "params": {...}, "trials": 200,
                 "imported": false}],
      "cluster": {... what `campaign submit` recorded, with "jobs": [...] ...},     (optional)
      "sample_headers": {"<node>": {"<source>": {"<key>": value}}}                 (optional)
    }
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailscope.store.errors import StoreError
from tailscope.store.limits import MAX_TRIALS
from tailscope.store.schema import check_schema_version

FORMAT = "tailscope-campaign"

Scalar = str | int | float | bool | None | list[str | int | float | bool | None]


def _expect(cond: bool, path: Path | str, key: str, expected: str, got: object = None) -> None:
    if not cond:
        shown = "" if got is None else f", found {json.dumps(got, default=str)[:60]}"
        raise StoreError(f"{path}: key {key!r}: expected {expected}{shown}")


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Plan:
    """Trials of one probe variant wanted per node (or, for imports, the variant an import stored)."""

    variant: str
    probe: str
    params: dict[str, Scalar]
    trials: int
    imported: bool = False

    @classmethod
    def from_json(cls, data: object, path: Path | str, key: str) -> Plan:
        _expect(isinstance(data, dict), path, key, "an object with variant, probe, params, trials", data)
        assert isinstance(data, dict)
        for name in ("variant", "probe"):
            _expect(
                isinstance(data.get(name), str) and bool(data.get(name)),
                path,
                f"{key}.{name}",
                "a non-empty string",
                data.get(name),
            )
        params = data.get("params", {})
        _expect(isinstance(params, dict), path, f"{key}.params", "an object", params)
        for pname, pvalue in params.items():
            items = pvalue if isinstance(pvalue, list) else [pvalue]
            ok = all(
                v is None or isinstance(v, str | bool | int) or (isinstance(v, float) and math.isfinite(v))
                for v in items
            )
            _expect(ok, path, f"{key}.params.{pname}", "a string, number, boolean or a list of them", pvalue)
        trials = data.get("trials")
        _expect(
            _int(trials) and 0 <= trials <= MAX_TRIALS,
            path,
            f"{key}.trials",
            f"a whole number from 0 to {MAX_TRIALS}",
            trials,
        )
        imported = data.get("imported", False)
        _expect(isinstance(imported, bool), path, f"{key}.imported", "true or false", imported)
        return cls(str(data["variant"]), str(data["probe"]), dict(params), int(trials), imported)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "variant": self.variant,
            "probe": self.probe,
            "params": self.params,
            "trials": self.trials,
        }
        if self.imported:
            out["imported"] = True
        return out


@dataclass
class ClusterJob:
    job_id: str
    kind: str
    nodelist: str | None
    submitted: str

    @classmethod
    def from_json(cls, data: object, path: Path | str, key: str) -> ClusterJob:
        _expect(isinstance(data, dict), path, key, "an object with job_id, kind, nodelist, submitted", data)
        assert isinstance(data, dict)
        for name in ("job_id", "kind", "submitted"):
            _expect(isinstance(data.get(name), str), path, f"{key}.{name}", "a string", data.get(name))
        nodelist = data.get("nodelist")
        _expect(nodelist is None or isinstance(nodelist, str), path, f"{key}.nodelist", "a string or null")
        return cls(str(data["job_id"]), str(data["kind"]), nodelist, str(data["submitted"]))

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "kind": self.kind,
            "nodelist": self.nodelist,
            "submitted": self.submitted,
        }


@dataclass
class ClusterRecord:
    """What `campaign submit` recorded: the spec's cluster plan and every job submitted for it."""

    spec: str | None = None
    partition: str | None = None
    nodelist: str | None = None
    node_count: int | None = None
    constraint: str | None = None
    events: str | None = None
    cluster_settings: dict[str, Scalar] = field(default_factory=dict)
    jobs: list[ClusterJob] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: object, path: Path | str) -> ClusterRecord:
        _expect(isinstance(data, dict), path, "cluster", "an object", data)
        assert isinstance(data, dict)
        out = cls()
        for name in ("spec", "partition", "nodelist", "constraint", "events"):
            value = data.get(name)
            _expect(
                value is None or isinstance(value, str), path, f"cluster.{name}", "a string or null", value
            )
            setattr(out, name, value)
        count = data.get("node_count")
        _expect(
            count is None or (_int(count) and count >= 0),
            path,
            "cluster.node_count",
            "a whole number >= 0 or null",
            count,
        )
        out.node_count = count
        settings = data.get("cluster_settings", {})
        _expect(isinstance(settings, dict), path, "cluster.cluster_settings", "an object", settings)
        for sname, svalue in settings.items():
            _expect(
                svalue is None or isinstance(svalue, str | int | float | bool),
                path,
                f"cluster.cluster_settings.{sname}",
                "a string, number or boolean",
                svalue,
            )
        out.cluster_settings = dict(settings)
        jobs = data.get("jobs", [])
        _expect(isinstance(jobs, list), path, "cluster.jobs", "a list", jobs)
        out.jobs = [ClusterJob.from_json(j, path, f"cluster.jobs[{i}]") for i, j in enumerate(jobs)]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "partition": self.partition,
            "nodelist": self.nodelist,
            "node_count": self.node_count,
            "constraint": self.constraint,
            "events": self.events,
            "cluster_settings": self.cluster_settings,
            "jobs": [j.to_json() for j in self.jobs],
        }


@dataclass
class Manifest:
    campaign_id: str
    name: str
    created: str
    tool_version: str
    schema_version: int
    plans: list[Plan] = field(default_factory=list)
    cluster: ClusterRecord | None = None
    # node -> source -> header scalars an import remembered (the perfcounts exporter writes them back)
    sample_headers: dict[str, dict[str, dict[str, Scalar]]] = field(default_factory=dict)

    # --- reading -----------------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: object, path: Path | str) -> Manifest:
        _expect(
            isinstance(data, dict) and data.get("format") == FORMAT,
            path,
            "format",
            f'"{FORMAT}" (this is not a tailscope campaign manifest)',
            data.get("format") if isinstance(data, dict) else data,
        )
        assert isinstance(data, dict)
        version = check_schema_version(data.get("schema_version"), str(path))
        cid = data.get("campaign_id")
        _expect(
            isinstance(cid, str) and bool(cid) and cid.isalnum(),
            path,
            "campaign_id",
            "a non-empty string of letters and digits",
            cid,
        )
        for name in ("name", "created", "tool_version"):
            _expect(isinstance(data.get(name, ""), str), path, name, "a string", data.get(name))
        plans = data.get("plans", [])
        _expect(isinstance(plans, list), path, "plans", "a list", plans)
        parsed = [Plan.from_json(p, path, f"plans[{i}]") for i, p in enumerate(plans)]
        cluster = ClusterRecord.from_json(data["cluster"], path) if data.get("cluster") is not None else None
        headers = data.get("sample_headers", {})
        _expect(isinstance(headers, dict), path, "sample_headers", "an object", headers)
        for node, per_source in headers.items():
            _expect(isinstance(per_source, dict), path, f"sample_headers.{node}", "an object", per_source)
            for source, values in per_source.items():
                _expect(
                    isinstance(values, dict), path, f"sample_headers.{node}.{source}", "an object", values
                )
        return cls(
            campaign_id=str(cid),
            name=str(data.get("name") or ""),
            created=str(data.get("created") or ""),
            tool_version=str(data.get("tool_version") or ""),
            schema_version=version,
            plans=parsed,
            cluster=cluster,
            sample_headers=headers,
        )

    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise StoreError(f"{path}: not UTF-8 text (byte {exc.start})") from exc

        def no_constant(name: str) -> None:
            raise ValueError(f"{name} is not a JSON number")

        def finite(text: str) -> float:
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(f"{text} is out of range for a number")
            return value

        try:
            data = json.loads(text, parse_constant=no_constant, parse_float=finite)
        except ValueError as exc:
            if not isinstance(exc, json.JSONDecodeError):
                raise StoreError(f"{path}: invalid JSON ({exc})") from exc
            raise StoreError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise StoreError(f"{path}: invalid manifest (nested too deeply)") from exc
        return cls.from_json(data, path)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "schema_version": self.schema_version,
            "campaign_id": self.campaign_id,
            "name": self.name,
            "created": self.created,
            "tool_version": self.tool_version,
            "plans": [p.to_json() for p in self.plans],
        }
        if self.cluster is not None:
            out["cluster"] = self.cluster.to_json()
        if self.sample_headers:
            out["sample_headers"] = self.sample_headers
        return out

    def dump(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n").encode()

    # --- questions every reader asks -------------------------------------------------------------------
    def planned_trials(self, *, include_imported: bool = True) -> dict[str, int]:
        """variant -> trials wanted per node."""
        return {p.variant: p.trials for p in self.plans if include_imported or not p.imported}

    def probe_plans(self) -> list[Plan]:
        """The plans of probes this tool runs (imports excluded)."""
        return [p for p in self.plans if not p.imported]

    def plan(self, variant: str) -> Plan | None:
        return next((p for p in self.plans if p.variant == variant), None)

    # --- changes (applied through `Campaign.update_manifest` under the campaign lock) -------------------
    def add_plan(self, plan: Plan) -> None:
        """Want `plan.trials` trials of `plan.variant` per node; a smaller number never shrinks a plan."""
        existing = self.plan(plan.variant)
        if existing is None:
            self.plans.append(plan)
        else:
            existing.trials = max(existing.trials, plan.trials)

    def set_plan_trials(self, variant: str, trials: int) -> None:
        plan = self.plan(variant)
        if plan is not None:
            plan.trials = trials
