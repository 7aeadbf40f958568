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
    lo = min(min(v) for v in data.values())
    hi = max(max(v) for v in data.values())
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(max(hi, lo * 10)))
    nbins = 60
    edges = [10 ** (lo_e + (hi_e - lo_e) * i / nbins) for i in range(nbins + 1)]
    plot_w, plot_h = W - LEFT - 20, H - BOTTOM - TOP

    def x_of(us: float) -> float:
        return LEFT + plot_w * (math.log10(us) - lo_e) / (hi_e - lo_e)

    counts: dict[str, list[float]] = {}
    for k, vs in data.items():
        c = [0] * nbins
        for v in vs:
            i = min(nbins - 1, max(0, int(nbins * (math.log10(v) - lo_e) / (hi_e - lo_e))))
            c[i] += 1
        counts[k] = [n / len(vs) for n in c]
    top = max(max(c) for c in counts.values()) or 1.0
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="15">{title}</text>',
    ]
    for e in range(lo_e, hi_e + 1):
        x = x_of(10**e)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" stroke="#ddd"/>')
        label = f"{10**e:g} us" if 10**e < 1000 else f"{10**e / 1000:g} ms"
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{label}</text>')
    bar_w = plot_w / nbins / max(1, len(counts))
    for si, (k, fracs) in enumerate(counts.items()):
        color = COLORS[si % len(COLORS)]
        for i, frac in enumerate(fracs):
            if frac <= 0:
                continue
            x = x_of(edges[i]) + si * bar_w
            h = plot_h * frac / top
            out.append(
                f'<rect x="{x:.1f}" y="{H - BOTTOM - h:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" fill="{color}" fill-opacity="0.8"/>'
            )
        for q, dash in ((0.5, "4,2"), (0.99, "1,2")):
            x = x_of(_pct(data[k], q))
            out.append(
                f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" '
                f'stroke="{color}" stroke-dasharray="{dash}"/>'
            )
        p50, p99 = _pct(data[k], 0.5), _pct(data[k], 0.99)
        out.append(
            f'<text x="{LEFT + 10}" y="{TOP + 16 + 16 * si}" fill="{color}">{k}: '
            f"n={len(data[k])} p50={p50:.1f} us p99={p99:.1f} us</text>"
        )
    if 10**lo_e <= limit_us <= 10**hi_e:
        x = x_of(limit_us)
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
