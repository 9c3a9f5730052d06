"""A cluster campaign spec: one TOML file says what runs where, how often, and how it is judged.

    [campaign]
    directory = "campaigns/fleet"      # relative to the spec file; every node writes its shards here
    name = "fleet"                     # optional

    [slurm]
    partition = "batch"                # optional
    nodes = "n[001-392]"               # a Slurm hostlist (or a list of names); or node_count + constraint
    node_count = 392                   # optional when nodes is given
    constraint = "skx"                 # optional
    time_limit = "01:00:00"            # sbatch --time
    steps = "parallel"                 # one srun step per node, all at once; "serial": one node at a time
    cpu_bind = "cores"                 # srun --cpu-bind
    trial_timeout = 300                # seconds per trial (default: the probe's own limit)
    sbatch_options = ["--account=ops"] # passed verbatim

    [[apps]]                           # the site's application (app/definition.py keys), or
    file = "lammps.toml"               # a definition file (relative to the spec); trials may override it
    trials = 20

    [[probes]]                         # optional when [[apps]] are given
    probe = "l2sum"
    trials = 50                        # per node
    page = "thp"                       # the page policy (also accepted inside options)
    options = { sums = 200, cpus = "cores" }

    [events]
    set = "software"                   # optional: an event set (name or file) for every probe's --events

    [thresholds]                       # analysis Settings (tailscope.analysis.model.Settings), optional
    thresholds = [0.05, 0.10]
    allowed_slow_rate = 0.01

    [cluster]                          # node screening (tailscope.analysis.cluster), optional
    alpha_drain = 0.05                 # family-wise, Bonferroni over the nodes
    alpha_retest = 0.10                # false-discovery rate, Benjamini-Hochberg
    min_node_effect = 0.01             # a node must be at least this much slower than the fleet
    bins = 0                           # speed bins; 0 = choose

    [corunner]                         # optional: a command started beside the trials of one node
    n2 = "stress-ng --cpu 2 --quiet"   # (sensitivity checks; tests make a node slow on purpose)

Errors name the file, the line of the offending key and what was expected (exit code 2 in the CLI).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailscope import hostlist, tomlfile
from tailscope.analysis.model import ClusterSettings, Settings
from tailscope.analysis.settings import settings_from_dict
from tailscope.app.variant import AppVariant
from tailscope.errors import InputError
from tailscope.options import SHARED, type_words
from tailscope.probes.catalogue import PROBES, ProbeVariant
from tailscope.store.params import PARAM_RENAMES
from tailscope.tomlfile import Table, TomlFile

_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^UNLIMITED$|^INFINITE$")
_SECTIONS = {"campaign", "slurm", "probes", "apps", "events", "thresholds", "cluster", "corunner"}
_SLURM_KEYS = {
    "partition",
    "nodes",
    "node_count",
    "constraint",
    "time_limit",
    "steps",
    "cpu_bind",
    "trial_timeout",
    "sbatch_options",
}
_PROBE_KEYS = {"probe", "trials", "page", "options"}


class SpecError(InputError, ValueError):
    """A campaign spec that cannot be used; the message is `FILE:LINE: key: what was expected`."""


@dataclass(frozen=True)
class ProbeEntry:
    variant: ProbeVariant | AppVariant  # a probe's, or an application's ([[apps]])
    trials: int


@dataclass(frozen=True)
class CampaignSpec:
    path: Path
    directory: Path
    name: str
    probes: tuple[ProbeEntry, ...]
    partition: str | None = None
    nodes: tuple[str, ...] | str | None = None  # a list of names, or one Slurm hostlist expression
    node_count: int | None = None
    constraint: str | None = None
    time_limit: str | None = None
    steps: str = "parallel"
    cpu_bind: str = "cores"
    trial_timeout: float | None = None
    sbatch_options: tuple[str, ...] = ()
    events: str | None = None
    settings: Settings = field(default_factory=Settings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    corunners: Mapping[str, str] = field(default_factory=dict)

    @property
    def nodelist(self) -> str | None:
        if self.nodes is None:
            return None
        return self.nodes if isinstance(self.nodes, str) else ",".join(self.nodes)

    def to_manifest(self) -> dict[str, Any]:
        """What the campaign records about its cluster plan (campaign.json, key "cluster")."""
        return {
            "spec": str(self.path),
            "partition": self.partition,
            "nodelist": self.nodelist,
            "node_count": self.node_count,
            "constraint": self.constraint,
            "events": self.events,
            "cluster_settings": dataclasses.asdict(self.cluster),
        }


def load_spec(path: Path) -> CampaignSpec:
    data, file = tomlfile.load(path, "the campaign spec", SpecError)
    return _parse(data, file)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _refuse_control_characters(value: object, where: TomlFile, section: str | None, key: str | None) -> None:
    """Every string of the spec ends up in job.sh or on an sbatch/srun command line: a newline or another
    control character would inject shell lines, so it is refused, naming the key and its line."""
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found:
            raise where.error(
                section, key, f"control character {found.group(0)!r} in a string (a value is one line)"
            )
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if _CONTROL.search(str(k)):
                raise where.error(section, None, f"control character in the key {str(k)!r}")
            if section is None:
                _refuse_control_characters(v, where, str(k), None)
            else:
                _refuse_control_characters(v, where, section, key or str(k))
    elif isinstance(value, list):
        for item in value:
            _refuse_control_characters(item, where, section, key)


def parse_spec(data: Mapping[str, Any], path: Path, text: str = "") -> CampaignSpec:
    return _parse(data, TomlFile(Path(path), text, SpecError))


def _parse(data: Mapping[str, Any], where: TomlFile) -> CampaignSpec:
    path = where.path
    _refuse_control_characters(data, where, None, None)
    where.table(None).known(data, sorted(_SECTIONS), what="section")
    campaign = _table(data, "campaign", where)
    directory = campaign.get("directory")
    if not isinstance(directory, str) or not directory:
        raise where.error("campaign", "directory", "expected the campaign directory as a string")
    root = Path(directory)
    if not root.is_absolute():
        root = (path.parent / root).resolve()
    name = campaign.get("name", root.name)
    if not isinstance(name, str):
        raise where.error("campaign", "name", "expected a string")

    slurm = _table(data, "slurm", where, required=False)
    checks = where.table("slurm")
    checks.known(slurm, sorted(_SLURM_KEYS))
    nodes = slurm.get("nodes")
    if nodes is not None:
        if isinstance(nodes, list) and nodes and all(isinstance(n, str) and n for n in nodes):
            nodes = tuple(nodes)
        elif not (isinstance(nodes, str) and nodes):
            raise where.error("slurm", "nodes", 'expected a hostlist like "n[1-3]" or a list of node names')
        else:
            try:
                hostlist.count(nodes)
            except hostlist.HostlistError as exc:
                raise where.error("slurm", "nodes", str(exc)) from None
    node_count = checks.whole("node_count", slurm.get("node_count"))
    if nodes is None and node_count is None:
        raise where.error("slurm", "nodes", "expected nodes (a hostlist) or node_count")
    time_limit = slurm.get("time_limit")
    if time_limit is not None and not (isinstance(time_limit, str) and _TIME.match(time_limit)):
        raise where.error(
            "slurm", "time_limit", 'expected a Slurm time like "30", "01:00:00" or "1-00:00:00"'
        )
    steps = slurm.get("steps", "parallel")
    if steps not in ("parallel", "serial"):
        raise where.error("slurm", "steps", 'expected "parallel" or "serial"')
    trial_timeout = checks.bounded("trial_timeout", slurm.get("trial_timeout"), SHARED["trial_timeout"])
    extra = slurm.get("sbatch_options", [])
    if not isinstance(extra, list) or not all(isinstance(o, str) and o.startswith("-") for o in extra):
        raise where.error("slurm", "sbatch_options", 'expected a list of options like ["--account=ops"]')
    checks.strings(slurm, ("partition", "constraint", "cpu_bind"))

    events = _table(data, "events", where, required=False).get("set")
    if events is not None and not (isinstance(events, str) and events):
        raise where.error("events", "set", 'expected an event set name or file, like "software"')
    probes = (_probes(data, where, events) if "probes" in data or "apps" not in data else ()) + _apps(
        data, where, path
    )

    thresholds = _table(data, "thresholds", where, required=False)
    try:
        settings = settings_from_dict(thresholds)
    except ValueError as exc:
        key = next((k for k in thresholds if f"'{k}'" in str(exc) or f" {k}" in str(exc)), None)
        raise where.error("thresholds", key, str(exc)) from exc

    cluster_table = _table(data, "cluster", where, required=False)
    cluster = _cluster_settings(cluster_table, where)

    corunners = _table(data, "corunner", where, required=False)
    for node, command in corunners.items():
        if not isinstance(command, str) or not command.strip():
            raise where.error("corunner", node, "expected the co-runner's command line as a string")

    return CampaignSpec(
        path=path.resolve(),
        directory=root,
        name=name,
        probes=probes,
        partition=slurm.get("partition"),
        nodes=nodes,
        node_count=node_count,
        constraint=slurm.get("constraint"),
        time_limit=time_limit,
        steps=steps,
        cpu_bind=slurm.get("cpu_bind", "cores"),
        trial_timeout=trial_timeout,
        sbatch_options=tuple(extra),
        events=events,
        settings=settings,
        cluster=cluster,
        corunners=dict(corunners),
    )


def _probes(data: Mapping[str, Any], where: TomlFile, events: str | None) -> tuple[ProbeEntry, ...]:
    entries = data.get("probes")
    if not isinstance(entries, list) or not entries:
        raise where.error(None, "probes", "expected at least one [[probes]] table")
    out = []
    seen: set[str] = set()
    checks = where.table("probes")
    for entry in entries:
        if not isinstance(entry, dict):
            raise where.error(None, "probes", "expected [[probes]] tables")
        checks.known(entry, sorted(_PROBE_KEYS))
        probe = entry.get("probe")
        if probe not in PROBES:
            raise where.error(
                "probes", "probe", f"unknown probe {probe!r}; expected one of {', '.join(PROBES)}"
            )
        trials = _trials(checks, entry.get("trials"))
        options = dict(entry.get("options", {}))
        if "page" in entry:  # the spec's word (as --page); the parameter is page_policy
            options["page"] = entry["page"]
        if events is not None and "events" not in options:
            options["events"] = events  # the campaign's event set, unless the probe names its own
        spec = PROBES[probe]
        by_dest = {o.dest: o for o in spec.all_options}
        params: dict[str, Any] = {}
        for key, value in options.items():
            dest = key.replace("-", "_")
            dest = PARAM_RENAMES.get(dest, dest)  # page -> page_policy
            option = by_dest.get(dest)
            if option is None:
                raise where.error(
                    "probes", key, f"{probe} has no option {key!r}; expected one of {', '.join(by_dest)}"
                )
            if option.type is bool:
                ok = isinstance(value, bool)
            elif option.type is int:
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif option.type is float:
                ok = isinstance(value, int | float) and not isinstance(value, bool)
            else:
                ok = isinstance(value, str | int) and not isinstance(value, bool)
                value = str(value)
            if not ok:
                raise where.error("probes", key, f"expected {type_words(option.type)} for {option.flag}")
            if option.choices and value not in option.choices:
                raise where.error("probes", key, f"expected one of {', '.join(option.choices)}")
            if value is not False:
                params[dest] = value
        variant = ProbeVariant(probe, params)
        if variant.variant_id in seen:
            raise where.error("probes", "probe", f"{probe} with the same options is listed twice")
        seen.add(variant.variant_id)
        out.append(ProbeEntry(variant, trials))
    return tuple(out)


def _apps(data: Mapping[str, Any], where: TomlFile, path: Path) -> tuple[ProbeEntry, ...]:
    """[[apps]]: the site's applications, each from its definition file or inline (app/definition.py)."""
    from tailscope.app.definition import load_definition, parse_definition

    entries = data.get("apps", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise where.error(None, "apps", "expected [[apps]] tables")
    out = []
    seen: set[str] = set()
    checks = where.table("apps")
    for entry in entries:
        table = dict(entry)
        trials = table.pop("trials", None)
        if "file" in table:
            file = table.pop("file")
            if table:
                raise where.error("apps", next(iter(table)), "an [[apps]] entry with file takes only trials")
            if not isinstance(file, str) or not file:
                raise where.error("apps", "file", "expected the definition file's path as a string")
            variant, own = load_definition(path.parent / file)
        else:
            variant, own = parse_definition(table, checks, base=path.parent)
        trials = _trials(checks, trials if trials is not None else own)
        if variant.variant_id in seen:
            raise where.error("apps", "argv", f"{variant.probe} with the same settings is listed twice")
        seen.add(variant.variant_id)
        out.append(ProbeEntry(variant, trials))
    return tuple(out)


def _trials(checks: Table, value: Any) -> int:
    """An entry's trials per node, within the command line's bounds (options.SHARED)."""
    bound = SHARED["trials"]
    try:
        return int(bound.check(value))
    except ValueError:
        raise checks.error("trials", f"expected the trials per node, {bound.words()}") from None


def _cluster_settings(table: Mapping[str, Any], where: TomlFile) -> ClusterSettings:
    checks = where.table("cluster")
    known = [f.name for f in dataclasses.fields(ClusterSettings)]
    values: dict[str, Any] = {}
    for key, value in table.items():
        checks.known((key,), known)
        if key == "bins":
            checks.whole(
                key, value, low=0, expected="expected a whole number >= 0 (0 = choose)", required=True
            )
        elif isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise where.error("cluster", key, "expected a number in [0, 1)")
        values[key] = value
    return ClusterSettings(**values)


def _table(data: Mapping[str, Any], name: str, where: TomlFile, *, required: bool = True) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        if required:
            raise where.error(None, name, f"expected a [{name}] table")
        return {}
    if not isinstance(value, dict):
        raise where.error(None, name, f"expected [{name}] to be a table")
    return value
