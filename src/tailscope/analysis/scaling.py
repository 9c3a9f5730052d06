"""Performance ratios and the seed's node-median scaling (seed 000 section III, Fig. 1).

- node median m: median of the ok runs of one (variant, node); the usual median (mean of the two
  middle values for even n), the same as `quantiles.quantile_estimate(x, 0.5)`.
- global median g: median of every ok run of the variant, all nodes pooled (the seed's "global median
  (2405 GFLOPS)" of its 2744-run ensemble).
- performance ratio r: value / m for higher-is-better metrics, m / value for lower-is-better ones, so
  r < 1 is always slower and 1 - r is the slowdown. A run is slow at threshold d when r < 1 - d.
- node-scaled value: value * g / m. It removes the node effect so run-to-run tails of different nodes
  can be pooled and sorted as in Fig. 1; a node's scaled values have median g.
- node ratio: m / g (or g / m for lower-is-better): how much slower a node is than the fleet.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

METHOD = (
    "performance ratio: value / node median (node median / value when lower is better); node-scaled value: "
    "value x variant global median / node median (McCalpin SC18 Fig. 1)"
)


def perf_ratio(value: ArrayLike, reference: ArrayLike, higher_is_better: ArrayLike) -> NDArray[np.float64]:
    """value / reference where higher is better, reference / value where lower is better (< 1 = slower).

    Values and references must be > 0 (checked by the caller: `summary.analyze` rejects others).
    """
    v = np.asarray(value, dtype=float)
    ref = np.asarray(reference, dtype=float)
    hib = np.asarray(higher_is_better, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hib, v / ref, ref / v)


def node_scaled(value: ArrayLike, node_median: ArrayLike, global_median: ArrayLike) -> NDArray[np.float64]:
    """The seed's median scaling: value x global median / node median (in the value's own unit)."""
    return np.asarray(value, dtype=float) * np.asarray(global_median, dtype=float) / np.asarray(node_median)
