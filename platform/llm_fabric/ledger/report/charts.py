"""Inline SVG charts for report.html: no JavaScript, no network, readable when printed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

PALETTE = ("#2f6db5", "#e07b39", "#3a9d5d", "#b53f5a", "#7d5ab5", "#8c8c8c", "#c9a227")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 300, 70, 60, 30


def _fmt(value: float) -> str:
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _scale(value: float, top: float, log: bool) -> float:
    if top <= 0:
        return 0.0
    if log:
        return math.log10(max(value, 1.0)) / math.log10(max(top, 10.0))
    return value / top


def _frame(title: str, body: list[str], legend: Sequence[str]) -> str:
    keys = "".join(
        f'<rect x="{LEFT + i * 150}" y="{HEIGHT - 18}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
        f'<text x="{LEFT + i * 150 + 14}" y="{HEIGHT - 9}" font-size="11">{escape(name)}</text>'
        for i, name in enumerate(legend)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" class="chart"><text x="{LEFT}" y="18" font-size="14" font-weight="bold">'
        f"{escape(title)}</text>{''.join(body)}{keys}</svg>"
    )


def bar_chart(
    title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *, log: bool = False
) -> str:
    """Grouped vertical bars: one group per label, one bar per series (log scale for wide ranges)."""
    plot_h = HEIGHT - BOTTOM - TOP
    top = max((v for _, values in series for v in values), default=0.0)
    group_w = (WIDTH - LEFT - 10) / max(len(labels), 1)
    bar_w = group_w * 0.8 / max(len(series), 1)
    body = [
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 10}" y2="{TOP + plot_h}" stroke="#444"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 8}" font-size="10" text-anchor="end">{_fmt(top)}</text>',
    ]
    for g, label in enumerate(labels):
        x0 = LEFT + g * group_w + group_w * 0.1
        for s, (name, values) in enumerate(series):
            value = values[g] if g < len(values) else 0.0
            h = plot_h * _scale(value, top, log)
            x = x0 + s * bar_w
            body.append(
                f'<rect x="{x:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[s % len(PALETTE)]}">'
                f"<title>{escape(label)} {escape(name)}: {_fmt(value)}</title></rect>"
            )
        body.append(
            f'<text x="{LEFT + (g + 0.5) * group_w:.1f}" y="{TOP + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
    return _frame(title + (" (log scale)" if log else ""), body, [name for name, _ in series])


def line_chart(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]]) -> str:
    """One line per series over the labels (days)."""
    plot_h = HEIGHT - BOTTOM - TOP
    top = max((v for _, values in series for v in values), default=0.0)
    step = (WIDTH - LEFT - 10) / max(len(labels) - 1, 1)
    body = [
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 10}" y2="{TOP + plot_h}" stroke="#444"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 8}" font-size="10" text-anchor="end">{_fmt(top)}</text>',
    ]
    for s, (_name, values) in enumerate(series):
        points = " ".join(
            f"{LEFT + i * step:.1f},{TOP + plot_h - plot_h * _scale(v, top, False):.1f}" for i, v in enumerate(values)
        )
        body.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[s % len(PALETTE)]}" stroke-width="2"/>')
    for i, label in enumerate(labels):
        if i % max(len(labels) // 10, 1) == 0:
            body.append(
                f'<text x="{LEFT + i * step:.1f}" y="{TOP + plot_h + 14}" font-size="10" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    return _frame(title, body, [name for name, _ in series])
