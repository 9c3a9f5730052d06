"""Which counter series are readings (gauges), not counts: no delta is ever taken of them.

Temperatures: likwid's TMP registers (`TEMP_CORE`, imported under pmu `thermal`), the seed sampler's
`pkg_temperature`. The seed format's status registers are gauges too; their arrays say so (importers/
perfcounts.py ARRAYS, width None). One rule for the importers (which store gauges with width null) and for
`metrics` (which reports their last reading instead of a delta).
"""

from __future__ import annotations

import re

_GAUGE_EVENT = re.compile(r"^(temp|pkg_temperature)", re.IGNORECASE)


def is_gauge(pmu: str, event: str) -> bool:
    """A reading, not a count: pmu `thermal`, or a temperature event."""
    return pmu.split(":")[0] == "thermal" or bool(_GAUGE_EVENT.match(event))
