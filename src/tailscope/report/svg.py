"""Small SVG charts for the offline report: no plotting library, no script, nothing fetched.

One `Chart` is one plot area with a linear x and y axis (or categories on x), any number of layers
(scatter, line, step, bars, error bars, reference lines and bands) and a legend. `Chart.render()` returns
an `<svg>` element as text; the same input always gives the same bytes (coordinates are written with one
decimal, layers in the order they were added).

Axis ticks are "nice numbers" (Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990): the tick
step is 1, 2, 5 or 10 times a power of ten, and the axis is widened to whole steps around the data.

Degenerate data does not fail: non-finite values (NaN, inf) are dropped pair-wise, one value or all-equal
values get a range around that value, and a chart with nothing finite says "no data".
Every text that reaches the SVG (titles, labels, tooltips) is escaped here; callers pass plain text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "KIND_COLORS",
    "PALETTE",
    "Chart",
    "axis_label",
    "ecdf",
    "esc",
    "histogram",
    "minmax_decimate",
    "nice_number",
    "nice_ticks",
    "tick_labels",
]

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
KIND_COLORS = {
    "none": "#0072B2",
    "systematic": "#D55E00",
    "transient": "#E69F00",
    "unclassified": "#CC79A7",
}
GREY = "#8c8c8c"
TEXT = "#222222"
GRID = "#e4e4e4"

_Scale = Callable[[float], float]  # data coordinate -> pixel

FONT_PX = 11
CHAR_PX = 6.2  # average advance of an 11 px sans-serif character: enough to lay out a legend and labels
MAX_CATEGORY_LABELS = 40  # more categories than this: label every k-th so labels do not overlap


def esc(text: object) -> str:
    """Text for an SVG/HTML text node or attribute value (escapes & < > " ')."""
    return html.escape(str(text), quote=True)


def axis_label(name: str, unit: str = "") -> str:
    """'bandwidth [GB/s]', or 'bandwidth' without a unit."""
    return f"{name} [{unit}]" if unit else name


def _finite(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def nice_number(x: float, *, round_: bool) -> float:
    """1, 2, 5 or 10 times a power of ten near x > 0: rounded to the nearest, or the next one up."""
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"nice_number: expected a finite number > 0, got {x!r}")
    exponent = math.floor(math.log10(x))
    fraction = x / 10.0**exponent
    if round_:
        nice = 1.0 if fraction < 1.5 else 2.0 if fraction < 3.0 else 5.0 if fraction < 7.0 else 10.0
    else:
        nice = 1.0 if fraction <= 1.0 else 2.0 if fraction <= 2.0 else 5.0 if fraction <= 5.0 else 10.0
    return nice * 10.0**exponent


def _spread_degenerate(lo: float, hi: float) -> tuple[float, float]:
    """A range to draw when there is none (lo == hi): +-5% of the value, or +-1 around zero."""
    if lo != hi:
        return lo, hi
    half = abs(lo) * 0.05 if lo != 0.0 else 1.0
    return lo - half, hi + half


def nice_ticks(lo: float, hi: float, max_ticks: int = 6) -> tuple[float, ...]:
    """Evenly spaced nice ticks covering [lo, hi]: the first <= lo, the last >= hi, at most ~max_ticks.

    nice_ticks(0, 100) -> 0, 20, ..., 100; nice_ticks(0.93, 1.02) -> 0.92, 0.94, ..., 1.02. Non-finite
    bounds give 0..1; equal bounds a range around the value (see `_spread_degenerate`).
    """
    if not (_finite(lo) and _finite(hi)):
        lo, hi = 0.0, 1.0
    lo, hi = float(min(lo, hi)), float(max(lo, hi))
    lo, hi = _spread_degenerate(lo, hi)
    span = nice_number(hi - lo, round_=False)
    step = nice_number(span / max(1, max_ticks - 1), round_=True)
    first = math.floor(lo / step + 1e-9)  # 1e-9: a bound that is a whole step stays one (0.3 / 0.1)
    last = math.ceil(hi / step - 1e-9)
    # Multiply integer indices by the step (no accumulated sum), then drop float noise: 0.1 * 3 = 0.3.
    digits = max(0, -math.floor(math.log10(step)) + 1)
    return tuple(round(i * step, digits) + 0.0 for i in range(first, last + 1))


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels with the same number of decimals, just enough to tell neighbouring ticks apart."""
    if not ticks:
        return []
    if len(ticks) == 1:
        return [f"{ticks[0]:.6g}"]
    step = abs(ticks[1] - ticks[0]) or 1.0
    biggest = max(abs(t) for t in ticks)
    if biggest >= 1e6 or step < 1e-4:
        return [f"{t:.4g}" for t in ticks]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if abs(round(step, decimals) - step) > step * 1e-6:
        decimals += 1  # steps of 2.5 or 0.25 need one more decimal than their power of ten
    return [f"{t + 0.0:.{decimals}f}" for t in ticks]  # + 0.0 turns -0.0 into 0.0


def ecdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Sorted finite values and the fraction of values <= each: the empirical CDF's jump points."""
    xs = sorted(float(v) for v in values if _finite(v))
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def histogram(values: Sequence[float], target_bins: int = 30) -> tuple[list[float], list[int]]:
    """Bin edges on nice multiples (width 1, 2 or 5 x 10^k) and the count in each bin [left, right)."""
    xs = sorted(float(v) for v in values if _finite(v))
    if not xs:
        return [], []
    lo, hi = _spread_degenerate(xs[0], xs[-1])
    width = nice_number((hi - lo) / max(1, target_bins), round_=True)
    # 1e-9 (of a bin): a value on an edge belongs to the bin on its right despite float error (0.9 / 0.02).
    first = math.floor(lo / width + 1e-9)
    n_bins = max(1, math.floor(hi / width + 1e-9) - first + 1)  # the maximum falls in the last bin
    digits = max(0, -math.floor(math.log10(width)) + 2)
    edges = [round((first + i) * width, digits) for i in range(n_bins + 1)]
    counts = [0] * n_bins
    for x in xs:
        i = min(n_bins - 1, max(0, math.floor((x - edges[0]) / width + 1e-9)))
        counts[i] += 1
    return edges, counts


def minmax_decimate(
    xs: Sequence[float], ys: Sequence[float], max_points: int
) -> tuple[list[float], list[float]]:
    """At most ~max_points points: per bucket of consecutive points keep the lowest and highest y.

    Spikes stay visible (a one-iteration dip survives as its bucket's minimum); order is kept.
    """
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if _finite(x) and _finite(y)]
    if len(pairs) <= max_points:
        return [p[0] for p in pairs], [p[1] for p in pairs]
    buckets = max(1, max_points // 2)
    out: list[tuple[float, float]] = []
    n = len(pairs)
    for b in range(buckets):
        chunk = pairs[b * n // buckets : (b + 1) * n // buckets]
        if not chunk:
            continue
        i_min = min(range(len(chunk)), key=lambda i: chunk[i][1])
        i_max = max(range(len(chunk)), key=lambda i: chunk[i][1])
        for i in sorted({i_min, i_max}):
            out.append(chunk[i])
    return [p[0] for p in out], [p[1] for p in out]


def _num(v: float) -> str:
    """A coordinate: one decimal is a tenth of a pixel; '-0.0' never appears."""
    text = f"{v:.1f}"
    return "0.0" if text == "-0.0" else text


@dataclass(frozen=True)
class _Layer:
    kind: str  # scatter | line | step | bars | errorbars | hline | vline | hband
    label: str
    color: str
    xs: tuple[float, ...] = ()
    ys: tuple[float, ...] = ()
    x2: tuple[float, ...] = ()  # bars: right edges; errorbars: lows
    y2: tuple[float, ...] = ()  # errorbars: highs
    tooltips: tuple[str, ...] = ()
    size: float = 2.5  # point radius or line width
    dash: str = ""
    opacity: float = 1.0
    in_legend: bool = True


class Chart:
    """One plot: add layers, then `render()`. Sizes are in CSS pixels of the SVG's viewBox."""

    def __init__(
        self,
        *,
        title: str,
        x_label: str,
        y_label: str,
        width: int = 640,
        height: int = 300,
        x_categories: Sequence[str] | None = None,
        y_from_zero: bool = False,
        x_extend: Sequence[float] = (),
        y_extend: Sequence[float] = (),
    ) -> None:
        self.title = title
        self.x_label = x_label
        self.y_label = y_label
        self.width = width
        self.height = height
        self.categories = tuple(str(c) for c in x_categories) if x_categories is not None else None
        self.y_from_zero = y_from_zero
        self.x_extend = tuple(float(v) for v in x_extend if _finite(v))
        self.y_extend = tuple(float(v) for v in y_extend if _finite(v))
        self.layers: list[_Layer] = []

    # --- layers ---------------------------------------------------------------------------------------
    def scatter(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        label: str,
        color: str = PALETTE[0],
        tooltips: Sequence[str] | None = None,
        radius: float = 2.5,
        legend: bool = True,
    ) -> Chart:
        """Points; each may carry a tooltip (an SVG <title>, shown on hover)."""
        xs2, ys2, tips = self._clean(xs, ys, tooltips)
        self.layers.append(
            _Layer("scatter", label, color, xs2, ys2, tooltips=tips, size=radius, in_legend=legend)
        )
        return self

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        label: str,
        color: str = PALETTE[0],
        width: float = 1.5,
        dash: str = "",
        opacity: float = 1.0,
    ) -> Chart:
        """A polyline through the points in the order given (a gap where a value is not finite)."""
        self.layers.append(
            _Layer(
                "line",
                label,
                color,
                tuple(float(x) for x in xs),
                tuple(float(y) for y in ys),
                size=width,
                dash=dash,
                opacity=opacity,
            )
        )
        return self

    def step(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        *,
        label: str,
        color: str = PALETTE[0],
        width: float = 1.5,
        start_y: float | None = 0.0,
    ) -> Chart:
        """A post-step line (an ECDF): y holds from each x to the next; starts at `start_y` at the first x."""
        xs2, ys2, _ = self._clean(xs, ys, None)
        if start_y is not None and xs2:
            xs2, ys2 = (xs2[0], *xs2), (float(start_y), *ys2)
        self.layers.append(_Layer("step", label, color, xs2, ys2, size=width))
        return self

    def bars(
        self,
        lefts: Sequence[float],
        rights: Sequence[float],
        heights: Sequence[float],
        *,
        label: str,
        color: str = PALETTE[0],
        tooltips: Sequence[str] | None = None,
    ) -> Chart:
        """Bars from y = 0 (histogram bins: left and right edges). A non-zero bar is at least 1.5 px tall."""
        keep = [
            i for i in range(len(heights)) if _finite(lefts[i]) and _finite(rights[i]) and _finite(heights[i])
        ]
        tips = tuple(str(tooltips[i]) for i in keep) if tooltips is not None else ()
        self.layers.append(
            _Layer(
                "bars",
                label,
                color,
                tuple(float(lefts[i]) for i in keep),
                tuple(float(heights[i]) for i in keep),
                x2=tuple(float(rights[i]) for i in keep),
                tooltips=tips,
            )
        )
        return self

    def error_bars(
        self,
        xs: Sequence[float],
        lows: Sequence[float],
        mids: Sequence[float],
        highs: Sequence[float],
        *,
        label: str,
        color: str = PALETTE[0],
        tooltips: Sequence[str] | None = None,
    ) -> Chart:
        """A vertical bar from low to high with a point at mid (the seed's Fig. 9: min, median, max)."""
        keep = [i for i in range(len(xs)) if all(_finite(v[i]) for v in (xs, lows, mids, highs))]
        tips = tuple(str(tooltips[i]) for i in keep) if tooltips is not None else ()
        self.layers.append(
            _Layer(
                "errorbars",
                label,
                color,
                tuple(float(xs[i]) for i in keep),
                tuple(float(mids[i]) for i in keep),
                x2=tuple(float(lows[i]) for i in keep),
                y2=tuple(float(highs[i]) for i in keep),
                tooltips=tips,
                size=3.0,
            )
        )
        return self

    def hline(self, y: float, *, label: str, color: str = GREY, dash: str = "5 3") -> Chart:
        """A horizontal reference line across the plot (a threshold), labelled at its right end."""
        if _finite(y):
            self.layers.append(_Layer("hline", label, color, ys=(float(y),), dash=dash, size=1.2))
        return self

    def vline(self, x: float, *, label: str, color: str = GREY, dash: str = "5 3") -> Chart:
        """A vertical reference line, labelled at its top."""
        if _finite(x):
            self.layers.append(_Layer("vline", label, color, xs=(float(x),), dash=dash, size=1.2))
        return self

    def hband(self, y0: float, y1: float, *, label: str, color: str = GREY, opacity: float = 0.15) -> Chart:
        """A shaded horizontal band between two y values (a tolerance band)."""
        if _finite(y0) and _finite(y1):
            lo, hi = min(y0, y1), max(y0, y1)
            self.layers.append(
                _Layer("hband", label, color, ys=(float(lo),), y2=(float(hi),), opacity=opacity)
            )
        return self

    @staticmethod
    def _clean(
        xs: Sequence[float], ys: Sequence[float], tooltips: Sequence[str] | None
    ) -> tuple[tuple[float, ...], tuple[float, ...], tuple[str, ...]]:
        if len(xs) != len(ys) or (tooltips is not None and len(tooltips) != len(xs)):
            raise ValueError("chart layer: x, y (and tooltips) must have the same length")
        keep = [i for i in range(len(xs)) if _finite(xs[i]) and _finite(ys[i])]
        tips = tuple(str(tooltips[i]) for i in keep) if tooltips is not None else ()
        return tuple(float(xs[i]) for i in keep), tuple(float(ys[i]) for i in keep), tips

    # --- ranges ---------------------------------------------------------------------------------------
    def _data_range(self) -> tuple[list[float], list[float]]:
        xs: list[float] = list(self.x_extend)
        ys: list[float] = list(self.y_extend)
        for layer in self.layers:
            if layer.kind in ("scatter", "line", "step"):
                pts = [(x, y) for x, y in zip(layer.xs, layer.ys, strict=True) if _finite(x) and _finite(y)]
                xs += [p[0] for p in pts]
                ys += [p[1] for p in pts]
            elif layer.kind == "bars":
                xs += [*layer.xs, *layer.x2]
                ys += [*layer.ys, 0.0]
            elif layer.kind == "errorbars":
                xs += list(layer.xs)
                ys += [*layer.x2, *layer.y2, *layer.ys]
            elif layer.kind == "hline":
                ys += list(layer.ys)
            elif layer.kind == "vline":
                xs += list(layer.xs)
            elif layer.kind == "hband":
                ys += [*layer.ys, *layer.y2]
        if self.y_from_zero and ys:
            ys.append(0.0)
        return xs, ys

    @property
    def has_data(self) -> bool:
        return any(
            layer.xs or layer.ys for layer in self.layers if layer.kind not in ("hline", "vline", "hband")
        )

    # --- rendering ------------------------------------------------------------------------------------
    def render(self, *, css_class: str = "chart", data: dict[str, str] | None = None) -> str:
        """The chart as one `<svg>` element; `data` becomes data-* attributes (for tests and styling)."""
        w, h = self.width, self.height
        legend = [layer for layer in self.layers if layer.label and layer.in_legend]
        legend_rows = self._legend_rows(legend, w - 80)
        rotate = self.categories is not None and max((len(c) for c in self.categories), default=0) > 6
        bottom = 44 + (min(60, int(CHAR_PX * max(len(c) for c in self.categories) * 0.7)) if rotate else 0)
        top = 26 + 16 * len(legend_rows)
        left, right = 66, 18
        pw, ph = max(10, w - left - right), max(10, h - top - bottom)
        h = top + ph + bottom

        xs, ys = self._data_range()
        if self.categories is not None:
            n = max(1, len(self.categories))
            x0, x1 = -0.5, n - 0.5
            x_ticks: tuple[float, ...] = ()
        else:
            x_ticks = nice_ticks(min(xs), max(xs)) if xs else nice_ticks(0.0, 1.0)
            x0, x1 = x_ticks[0], x_ticks[-1]
        y_ticks = nice_ticks(min(ys), max(ys), max_ticks=6) if ys else nice_ticks(0.0, 1.0)
        y0, y1 = y_ticks[0], y_ticks[-1]

        def sx(x: float) -> float:
            return left + (x - x0) / (x1 - x0) * pw

        def sy(y: float) -> float:
            return top + ph - (y - y0) / (y1 - y0) * ph

        attrs = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in sorted((data or {}).items()))
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{esc(css_class)}" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="{esc(self.title)}"{attrs}>',
            f"<title>{esc(self.title)}</title>",
            f'<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>',
            f'<text x="{left}" y="16" font-size="13" font-weight="bold" fill="{TEXT}">'
            f"{esc(self.title)}</text>",
        ]
        out += self._legend_svg(legend_rows, left, 22)
        # Grid and y ticks.
        y_labels = tick_labels(y_ticks)
        for t, lab in zip(y_ticks, y_labels, strict=True):
            y = sy(t)
            out.append(f'<line x1="{left}" y1="{_num(y)}" x2="{left + pw}" y2="{_num(y)}" stroke="{GRID}"/>')
            out.append(
                f'<text x="{left - 5}" y="{_num(y + 3.5)}" font-size="{FONT_PX}" text-anchor="end" '
                f'fill="{TEXT}">{esc(lab)}</text>'
            )
        out += self._x_axis_svg(x_ticks, sx, left, top, pw, ph, rotate)
        out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999999"/>')
        out.append(
            f'<text x="{left + pw / 2:.1f}" y="{h - 6}" font-size="{FONT_PX}" text-anchor="middle" '
            f'fill="{TEXT}">{esc(self.x_label)}</text>'
        )
        cy = top + ph / 2
        out.append(
            f'<text x="13" y="{cy:.1f}" font-size="{FONT_PX}" text-anchor="middle" fill="{TEXT}" '
            f'transform="rotate(-90 13 {cy:.1f})">{esc(self.y_label)}</text>'
        )
        if not self.has_data:
            out.append(
                f'<text x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" font-size="13" text-anchor="middle" '
                f'fill="{GREY}">no data</text>'
            )
        for layer in self.layers:
            out += self._layer_svg(layer, sx, sy, left, top, pw, ph)
        out.append("</svg>")
        return "\n".join(out)

    def _x_axis_svg(
        self,
        x_ticks: tuple[float, ...],
        sx: _Scale,
        left: float,
        top: float,
        pw: float,
        ph: float,
        rotate: bool,
    ) -> list[str]:
        out = []
        base = top + ph
        if self.categories is not None:
            n = len(self.categories)
            every = max(1, math.ceil(n / MAX_CATEGORY_LABELS))
            for i, name in enumerate(self.categories):
                if i % every:
                    continue
                x = sx(i)
                out.append(
                    f'<line x1="{_num(x)}" y1="{base}" x2="{_num(x)}" y2="{base + 4}" stroke="#999999"/>'
                )
                if rotate:
                    out.append(
                        f'<text x="{_num(x)}" y="{base + 14}" font-size="{FONT_PX}" text-anchor="end" '
                        f'fill="{TEXT}" transform="rotate(-40 {_num(x)} {base + 14})">{esc(name)}</text>'
                    )
                else:
                    out.append(
                        f'<text x="{_num(x)}" y="{base + 15}" font-size="{FONT_PX}" text-anchor="middle" '
                        f'fill="{TEXT}">{esc(name)}</text>'
                    )
            return out
        for t, lab in zip(x_ticks, tick_labels(x_ticks), strict=True):
            x = sx(t)
            out.append(f'<line x1="{_num(x)}" y1="{top}" x2="{_num(x)}" y2="{base}" stroke="{GRID}"/>')
            out.append(
                f'<text x="{_num(x)}" y="{base + 15}" font-size="{FONT_PX}" text-anchor="middle" '
                f'fill="{TEXT}">{esc(lab)}</text>'
            )
        return out

    @staticmethod
    def _legend_rows(legend: list[_Layer], width: float) -> list[list[_Layer]]:
        rows: list[list[_Layer]] = []
        used = width + 1.0
        for layer in legend:
            w = 24 + CHAR_PX * len(layer.label) + 12
            if used + w > width:
                rows.append([])
                used = 0.0
            rows[-1].append(layer)
            used += w
        return rows

    @staticmethod
    def _legend_svg(rows: list[list[_Layer]], left: float, top: float) -> list[str]:
        out = []
        for r, row in enumerate(rows):
            x = left
            y = top + 16 * r + 8
            for layer in row:
                if layer.kind in ("scatter", "errorbars"):
                    out.append(f'<circle cx="{_num(x + 8)}" cy="{_num(y)}" r="3.5" fill="{layer.color}"/>')
                elif layer.kind in ("bars", "hband"):
                    out.append(
                        f'<rect x="{_num(x + 2)}" y="{_num(y - 5)}" width="12" height="10" '
                        f'fill="{layer.color}" fill-opacity="{max(layer.opacity, 0.35):.2f}"/>'
                    )
                else:
                    dash = f' stroke-dasharray="{layer.dash}"' if layer.dash else ""
                    out.append(
                        f'<line x1="{_num(x)}" y1="{_num(y)}" x2="{_num(x + 18)}" y2="{_num(y)}" '
                        f'stroke="{layer.color}" stroke-width="2"{dash}/>'
                    )
                out.append(
                    f'<text x="{_num(x + 22)}" y="{_num(y + 4)}" font-size="{FONT_PX}" fill="{TEXT}">'
                    f"{esc(layer.label)}</text>"
                )
                x += 24 + CHAR_PX * len(layer.label) + 12
        return out

    def _layer_svg(
        self, layer: _Layer, sx: _Scale, sy: _Scale, left: float, top: float, pw: float, ph: float
    ) -> list[str]:
        c = layer.color
        dash = f' stroke-dasharray="{layer.dash}"' if layer.dash else ""
        label = esc(layer.label)
        if layer.kind == "scatter":
            out = [f'<g fill="{c}" data-layer="{label}">']
            for i, (x, y) in enumerate(zip(layer.xs, layer.ys, strict=True)):
                tip = f"<title>{esc(layer.tooltips[i])}</title>" if layer.tooltips else ""
                end = f">{tip}</circle>" if tip else "/>"
                out.append(f'<circle cx="{_num(sx(x))}" cy="{_num(sy(y))}" r="{layer.size:g}"{end}')
            out.append("</g>")
            return out
        if layer.kind in ("line", "step"):
            d = self._path(layer, sx, sy)
            if not d:
                return []
            return [
                f'<path d="{d}" fill="none" stroke="{c}" stroke-width="{layer.size:g}" '
                f'stroke-opacity="{layer.opacity:g}" stroke-linejoin="round"{dash} data-layer="{label}"/>'
            ]
        if layer.kind == "bars":
            out = [f'<g fill="{c}" fill-opacity="0.8" data-layer="{label}">']
            base = sy(0.0)
            for i, (x, h, xr) in enumerate(zip(layer.xs, layer.ys, layer.x2, strict=True)):
                top_y = sy(h)
                if h != 0 and abs(base - top_y) < 1.5:
                    top_y = base - 1.5 if h > 0 else base + 1.5
                y_lo, y_hi = min(base, top_y), max(base, top_y)
                x_l, x_r = sx(x), sx(xr)
                bar_w = max(0.5, x_r - x_l - 0.6)  # 0.6 px gap between neighbouring bins
                tip = f"<title>{esc(layer.tooltips[i])}</title>" if layer.tooltips else ""
                out.append(
                    f'<rect x="{_num(x_l)}" y="{_num(y_lo)}" width="{_num(bar_w)}" '
                    f'height="{_num(y_hi - y_lo)}">{tip}</rect>'
                )
            out.append("</g>")
            return out
        if layer.kind == "errorbars":
            out = [f'<g stroke="{c}" fill="{c}" data-layer="{label}">']
            for i, (x, mid, lo, hi) in enumerate(zip(layer.xs, layer.ys, layer.x2, layer.y2, strict=True)):
                px = _num(sx(x))
                tip = f"<title>{esc(layer.tooltips[i])}</title>" if layer.tooltips else ""
                out.append(
                    f'<g><line x1="{px}" y1="{_num(sy(lo))}" x2="{px}" y2="{_num(sy(hi))}" '
                    f'stroke-width="1.5"/>'
                    f'<line x1="{_num(sx(x) - 4)}" y1="{_num(sy(lo))}" x2="{_num(sx(x) + 4)}" '
                    f'y2="{_num(sy(lo))}"/><line x1="{_num(sx(x) - 4)}" y1="{_num(sy(hi))}" '
                    f'x2="{_num(sx(x) + 4)}" y2="{_num(sy(hi))}"/>'
                    f'<circle cx="{px}" cy="{_num(sy(mid))}" r="{layer.size:g}">{tip}</circle></g>'
                )
            out.append("</g>")
            return out
        if layer.kind == "hline":
            y = _num(sy(layer.ys[0]))
            return [
                f'<line x1="{left}" y1="{y}" x2="{left + pw}" y2="{y}" stroke="{c}" '
                f'stroke-width="{layer.size:g}"{dash} data-layer="{label}"><title>{label}</title></line>'
            ]
        if layer.kind == "vline":
            x = _num(sx(layer.xs[0]))
            return [
                f'<line x1="{x}" y1="{top}" x2="{x}" y2="{top + ph}" stroke="{c}" '
                f'stroke-width="{layer.size:g}"{dash} data-layer="{label}"><title>{label}</title></line>'
            ]
        if layer.kind == "hband":
            y_top, y_bottom = sy(layer.y2[0]), sy(layer.ys[0])
            return [
                f'<rect x="{left}" y="{_num(y_top)}" width="{pw}" height="{_num(y_bottom - y_top)}" '
                f'fill="{c}" fill-opacity="{layer.opacity:g}" data-layer="{label}">'
                f"<title>{label}</title></rect>"
            ]
        raise AssertionError(f"unknown layer kind {layer.kind}")

    @staticmethod
    def _path(layer: _Layer, sx: _Scale, sy: _Scale) -> str:
        parts: list[str] = []
        pen_up = True
        prev_y = 0.0
        for x, y in zip(layer.xs, layer.ys, strict=True):
            if not (_finite(x) and _finite(y)):
                pen_up = True  # a gap in a line where a value is missing
                continue
            px, py = _num(sx(x)), _num(sy(y))
            if pen_up:
                parts.append(f"M{px} {py}")
                pen_up = False
            elif layer.kind == "step":
                parts.append(f"H{px}V{py}" if y != prev_y else f"H{px}")
            else:
                parts.append(f"L{px} {py}")
            prev_y = y
        return "".join(parts)
