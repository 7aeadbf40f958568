"""A latency histogram as an SVG image: no plotting library, one file a browser shows.

Log-spaced bins (latencies span microseconds to milliseconds), one bar series per
measurement, p50 and p99 marked, the 4 ms hard limit drawn when it is on the scale.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape

from goosectl.protocols.files import write_new

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
W, H, LEFT, BOTTOM, TOP = 900, 420, 70, 60, 30


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def write_svg(
    path: Path, series: dict[str, list[int]], title: str, limit_us: float = 4000.0
) -> Path:
    """`series` maps a label to latencies in ns."""
    write_new(path, render_svg(series, title, limit_us))
    return path


def render_svg(series: dict[str, list[int]], title: str, limit_us: float = 4000.0) -> str:
    """The histogram as SVG text (`write_svg` writes it; `goosectl web` serves it).
    `series` maps a label to latencies in ns; labels and title are escaped, since a page
    embeds the text."""
    title = escape(title)
    series = {escape(k): v for k, v in series.items()}
    data = {k: [max(v, 1) / 1000.0 for v in vs] for k, vs in series.items() if vs}
    scale = _Scale(min(min(v) for v in data.values()), max(max(v) for v in data.values()))
    counts = {k: scale.shares(vs) for k, vs in data.items()}
    top = max(max(c) for c in counts.values()) or 1.0
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="15">{title}</text>',
        *scale.decades(),
    ]
    bar_w = scale.plot_w / NBINS / max(1, len(counts))
    for si, (k, fracs) in enumerate(counts.items()):
        out += _series(scale, si, k, fracs, data[k], top, bar_w)
    if 10**scale.lo_e <= limit_us <= 10**scale.hi_e:
        x = scale.x_of(limit_us)
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" '
            f'stroke="red" stroke-width="2"/>'
        )
        out.append(
            f'<text x="{x - 4:.1f}" y="{TOP + 12}" text-anchor="end" fill="red">4 ms limit</text>'
        )
    out.append(
        f'<text x="{W / 2}" y="{H - 15}" text-anchor="middle">latency '
        f"(log scale); dashed: p50, dotted: p99; bars: share of samples per bin</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


#: bins across the decades the samples span
NBINS = 60


class _Scale:
    """The log-scaled x axis: whole decades from below the fastest sample to above the
    slowest (at least one), cut into NBINS bins."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo_e = math.floor(math.log10(lo))
        self.hi_e = math.ceil(math.log10(max(hi, lo * 10)))
        span = self.hi_e - self.lo_e
        self.edges = [10 ** (self.lo_e + span * i / NBINS) for i in range(NBINS + 1)]
        self.plot_w, self.plot_h = W - LEFT - 20, H - BOTTOM - TOP

    def x_of(self, us: float) -> float:
        return LEFT + self.plot_w * (math.log10(us) - self.lo_e) / (self.hi_e - self.lo_e)

    def shares(self, vs: list[float]) -> list[float]:
        """The share of the samples `vs` (us) in each bin."""
        c = [0] * NBINS
        for v in vs:
            i = int(NBINS * (math.log10(v) - self.lo_e) / (self.hi_e - self.lo_e))
            c[min(NBINS - 1, max(0, i))] += 1
        return [n / len(vs) for n in c]

    def decades(self) -> list[str]:
        """A grid line and a label at every decade."""
        out = []
        for e in range(self.lo_e, self.hi_e + 1):
            x = self.x_of(10**e)
            out.append(
                f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" stroke="#ddd"/>'
            )
            label = f"{10**e:g} us" if 10**e < 1000 else f"{10**e / 1000:g} ms"
            out.append(
                f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{label}</text>'
            )
        return out


def _series(
    scale: _Scale,
    si: int,
    label: str,
    fracs: list[float],
    samples: list[float],
    top: float,
    bar_w: float,
) -> list[str]:
    """Series `si`: its bars (`top`: the share a full-height bar stands for), its p50
    and p99 lines, and its legend line."""
    color = COLORS[si % len(COLORS)]
    out = []
    for i, frac in enumerate(fracs):
        if frac <= 0:
            continue
        x = scale.x_of(scale.edges[i]) + si * bar_w
        h = scale.plot_h * frac / top
        out.append(
            f'<rect x="{x:.1f}" y="{H - BOTTOM - h:.1f}" width="{bar_w:.1f}" '
            f'height="{h:.1f}" fill="{color}" fill-opacity="0.8"/>'
        )
    for q, dash in ((0.5, "4,2"), (0.99, "1,2")):
        x = scale.x_of(_pct(samples, q))
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" '
            f'stroke="{color}" stroke-dasharray="{dash}"/>'
        )
    p50, p99 = _pct(samples, 0.5), _pct(samples, 0.99)
    out.append(
        f'<text x="{LEFT + 10}" y="{TOP + 16 + 16 * si}" fill="{color}">{label}: '
        f"n={len(samples)} p50={p50:.1f} us p99={p99:.1f} us</text>"
    )
    return out
