"""Hand-written SVG line charts (no third-party plotting in a standard-library harness).

Output is deterministic text (fixed precision, no timestamps) so regenerated docs diff cleanly.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 860, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 250, 48, 56
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f")


@dataclass
class Series:
    name: str
    xs: list[float]
    ys: list[float | None]   # None = no point (gap in the line)
    dashed: bool = False
    markers: bool = True


def _fmt(v: float) -> str:
    return f"{v:.1f}"


def line_chart(title: str, x_label: str, y_label: str, series: list[Series],
               x_range: tuple[float, float], y_range: tuple[float, float],
               x_ticks: list[float], y_ticks: list[float], y_tick_fmt: str = "{:.1f}",
               note: str = "") -> str:
    """A titled chart with axes, grid, ticks, one polyline per series and a legend on the right."""
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    (x0, x1), (y0, y1) = x_range, y_range

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return TOP + ph - (min(max(y, y0), y1) - y0) / (y1 - y0) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2:.0f}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for y in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{_fmt(sy(y))}" x2="{LEFT + pw}" y2="{_fmt(sy(y))}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{_fmt(sy(y) + 4)}" text-anchor="end">{escape(y_tick_fmt.format(y))}</text>')
    for x in x_ticks:
        out.append(f'<line x1="{_fmt(sx(x))}" y1="{TOP + ph}" x2="{_fmt(sx(x))}" y2="{TOP + ph + 5}" stroke="black"/>')
        out.append(f'<text x="{_fmt(sx(x))}" y="{TOP + ph + 18}" text-anchor="middle">{x:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    out.append(f'<text x="{LEFT + pw / 2:.0f}" y="{HEIGHT - 14}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(16,{TOP + ph / 2:.0f}) rotate(-90)" text-anchor="middle">'
               f'{escape(y_label)}</text>')
    for i, s in enumerate(series):
        out.extend(_series(s, PALETTE[i % len(PALETTE)], sx, sy))
        ly = TOP + 10 + i * 20
        dash = ' stroke-dasharray="6,4"' if s.dashed else ""
        out.append(f'<line x1="{LEFT + pw + 12}" y1="{ly}" x2="{LEFT + pw + 36}" y2="{ly}" '
                   f'stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{LEFT + pw + 42}" y="{ly + 4}">{escape(s.name)}</text>')
    if note:
        out.append(f'<text x="{LEFT}" y="{HEIGHT - 30 + 26}" font-size="10" fill="#555">{escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _series(s: Series, color: str, sx, sy) -> list[str]:
    """Polyline segments (split at None values) plus optional point markers."""
    out, seg = [], []
    dash = ' stroke-dasharray="6,4"' if s.dashed else ""
    points = list(zip(s.xs, s.ys)) + [(None, None)]
    for x, y in points:
        if y is None:
            if len(seg) > 1:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="'
                           + " ".join(f"{_fmt(px)},{_fmt(py)}" for px, py in seg) + '"/>')
            seg = []
            continue
        seg.append((sx(x), sy(y)))
        if s.markers:
            out.append(f'<circle cx="{_fmt(sx(x))}" cy="{_fmt(sy(y))}" r="3" fill="{color}"/>')
    return out
