"""One campaign summarised per (node, probe variant): the entries `history add` appends.

The numbers come from the campaign's analysis (`workflow.analyze_campaign`, with the judging settings the
caller resolved): the median and its exact order-statistic interval, the slow-run rate at the primary
threshold, the node's verdict, the causes of its flagged runs counted, the trial count and the time span of
the trials. The node facts are the campaign's latest facts of that node (`nodes` view), reduced to what
describes the node (`comparable_facts`: free page counts and names are left out) and stored once per
distinct set (`history_facts`, keyed by their digest).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tailscope.analysis.model import CampaignAnalysis

# Facts that change without the node changing (free huge pages), or name it: not compared, not stored.
VOLATILE_FACTS = frozenset({"hugepage_pools", "node", "hostname", "collected_at", "task"})


@dataclass(frozen=True)
class Entry:
    """One campaign's summary of one (node, probe variant)."""

    campaign: str
    campaign_name: str | None
    node: str
    probe: str
    variant: str
    metric: str
    unit: str
    higher_is_better: bool
    started_at: dt.datetime
    ended_at: dt.datetime
    n: int
    n_failed: int
    median: float
    median_lower: float | None
    median_upper: float | None
    slow_rate: float
    verdict: str
    causes: str  # JSON object: cause -> flagged runs
    facts_digest: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.campaign, self.node, self.variant)


@dataclass(frozen=True)
class FactSet:
    node: str
    digest: str
    collected_at: dt.datetime
    facts: str  # JSON, sorted keys


@dataclass(frozen=True)
class CampaignSummary:
    campaign: str
    name: str | None
    entries: tuple[Entry, ...]
    facts: tuple[FactSet, ...]


def comparable_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts that describe the node, nested values as compact JSON text (one comparable value each)."""
    out: dict[str, Any] = {}
    for key, value in facts.items():
        if key in VOLATILE_FACTS:
            continue
        if isinstance(value, dict | list):
            value = json.dumps(value, sort_keys=True, separators=(",", ":"))
        out[str(key)] = value
    return out


def facts_digest(facts_json: str) -> str:
    return hashlib.sha256(facts_json.encode()).hexdigest()[:32]


def facts_text(facts: dict[str, Any]) -> str:
    return json.dumps(comparable_facts(facts), sort_keys=True, separators=(",", ":"), default=str)


def _utc(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def summarize_analysis(
    analysis: CampaignAnalysis, name: str | None, node_facts: dict[str, tuple[dt.datetime, dict[str, Any]]]
) -> CampaignSummary:
    """Entries of an analysed campaign; `node_facts`: node -> (collected_at, facts)."""
    spans: dict[tuple[str, str], list[dt.datetime]] = {}
    causes: dict[tuple[str, str], Counter[str]] = {}
    for run in analysis.runs:
        key = (run.node, run.variant)
        at = _utc(run.started_at)
        span = spans.setdefault(key, [at, at])
        span[0], span[1] = min(span[0], at), max(span[1], at)
        if run.causes:
            causes.setdefault(key, Counter())[run.causes[0].cause] += 1
    verdicts = {h.node: h.verdict for h in analysis.nodes}
    facts_rows: dict[tuple[str, str], FactSet] = {}
    digest_of: dict[str, str] = {}
    for node, (collected, facts) in node_facts.items():
        text = facts_text(facts)
        digest = facts_digest(text)
        digest_of[node] = digest
        facts_rows[(node, digest)] = FactSet(node, digest, collected, text)
    entries = []
    for g in analysis.groups:
        key = (g.node, g.variant)
        if key not in spans:
            continue
        started, ended = spans[key]
        slow_rate = g.n_slow / g.n if g.n else 0.0
        entries.append(
            Entry(
                campaign=analysis.campaign,
                campaign_name=name,
                node=g.node,
                probe=g.probe,
                variant=g.variant,
                metric=g.metric,
                unit=g.unit,
                higher_is_better=bool(g.higher_is_better),
                started_at=started,
                ended_at=ended,
                n=int(g.n),
                n_failed=int(g.n_failed),
                median=float(g.median),
                median_lower=g.median_ci.lower,
                median_upper=g.median_ci.upper,
                slow_rate=float(slow_rate),
                verdict=verdicts.get(g.node, "healthy"),
                causes=json.dumps(dict(sorted(causes.get(key, Counter()).items())), separators=(",", ":")),
                facts_digest=digest_of.get(g.node, ""),
            )
        )
    return CampaignSummary(analysis.campaign, name, tuple(entries), tuple(facts_rows.values()))
