"""Models the report draws that the analysis does not build: the chain `check --deep` walked.

The application layer (verbs/deep.py) builds a `DeepResult` and writes it to DIR/deep.json; the report
(report/deep_section.py) and the terminal are handed one. Plain data and its
file (`load_deep`), importing nothing above it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AS_EXPECTED, DIFFERS, NOT_JUDGED = "as expected", "differs", "not judged"


@dataclass
class Step:
    probe: str  # the degraded probe
    why: str  # what made it degraded
    # {probe, isolates, finding, expected, status (as expected | differs | not judged)}
    follow_ups: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DeepResult:
    steps: list[Step]
    counters: str  # what step 3 did
    dimms: dict[str, Any] | None = None
    # the suite's verdict state (healthy | degraded | inconclusive): under an inconclusive verdict (too busy
    # to judge) a followed probe had slow runs but is not called degraded
    verdict: str = "healthy"

    @property
    def inconclusive(self) -> bool:
        return self.verdict == "inconclusive"

    def step_word(self) -> str:
        """How a followed probe is called: degraded, or only followed under an inconclusive verdict."""
        if self.inconclusive:
            return "followed up (the verdict is inconclusive: not called degraded)"
        return "degraded"

    def lines(self) -> list[str]:
        if not self.steps:
            return ["deep: no probe was degraded; no micro-architecture follow-up needed"]
        out = []
        for s in self.steps:
            out.append(f"deep: {s.probe} {self.step_word()}: {s.why}")
            for f in s.follow_ups:
                out.append(f"  -> {f['probe']} ({f['isolates']}): {f['finding']}")
                if f.get("expected"):
                    out.append(f"     expected {f['expected']}: {f.get('status', NOT_JUDGED)}")
        out.append(f"deep: counters: {self.counters}")
        if self.dimms is not None:
            out.append(f"deep: DIMMs: {self.dimms.get('dimms_unreadable') or self.dimms.get('summary')}")
        return out


def load_deep(campaign: Path) -> DeepResult | None:
    """The chain `run_deep` (verbs/deep.py) wrote to DIR/deep.json, or None when the campaign had no
    `check --deep`."""
    path = Path(campaign) / "deep.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        from tailscope.errors import InputError

        raise InputError(f"{path}: not the deep.json `check --deep` writes ({exc})") from exc
    steps = [Step(s["probe"], s["why"], list(s.get("follow_ups", []))) for s in doc.get("steps", [])]
    verdict = str(doc.get("verdict", "healthy"))
    return DeepResult(steps, str(doc.get("counters", "")), doc.get("dimms"), verdict)
