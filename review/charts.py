"""Geometry for the validate page's server-side SVG charts. Only numbers are computed here; the templates draw them,
so every label (site names come from websites) goes through Django's autoescape like any other page text."""
from __future__ import annotations

MAX_SITES = 40  # beyond this the chart stops being readable; the table below it lists every site
ROW_HEIGHT = 22
LABEL_WIDTH = 180
PLOT_WIDTH = 420
TOP = 30


def _x(value: float) -> float:
    return round(LABEL_WIDTH + value * PLOT_WIDTH, 1)


def _marker(value: float | None, interval: tuple | None, y: float) -> dict | None:
    if interval is None or value is None:
        return None
    return {"x": _x(value), "lo": _x(interval[0]), "hi": _x(interval[1]), "y": y, "value": value,
            "interval": interval}


def site_intervals_chart(per_site: list[dict]) -> dict:
    """Precision and recall per site with 95% intervals: sites with the most judged or true successes first."""
    ranked = sorted((r for r in per_site if r["judge_pass"] or r["verifier_pass"]),
                    key=lambda r: (-(r["judge_pass"] + r["verifier_pass"]), r["name"]))
    shown = ranked[:MAX_SITES]
    rows = []
    for index, row in enumerate(shown):
        y = TOP + index * ROW_HEIGHT
        rows.append({"name": row["name"], "y": y, "text_y": y + 4, "episodes": row["episodes"],
                     "precision": _marker(row["precision"], row["precision_ci"], y - 4),
                     "recall": _marker(row["recall"], row["recall_ci"], y + 4)})
    height = TOP + max(1, len(rows)) * ROW_HEIGHT + 10
    ticks = [{"x": _x(t / 4), "label": f"{t * 25}%"} for t in range(5)]
    return {"rows": rows, "width": LABEL_WIDTH + PLOT_WIDTH + 20, "height": height, "ticks": ticks,
            "axis_bottom": height - 10, "hidden": len(ranked) - len(shown), "label_x": LABEL_WIDTH - 8}


def _shade(share: float) -> str:
    """White to the accent blue by the cell's share of episodes; dark cells get white text."""
    start, end = (255, 255, 255), (11, 92, 173)
    return "#" + "".join(f"{round(a + (b - a) * share):02x}" for a, b in zip(start, end, strict=True))


def confusion_heatmap(figures: dict) -> dict:
    """The 2x2 confusion matrix as cells shaded by their share of the episodes (truth rows, judge columns)."""
    n = max(1, figures["episodes"])
    size, left, top = 120, 130, 40
    layout = [("tp", 0, 0, "true positive"), ("fn", 0, 1, "false negative"),
              ("fp", 1, 0, "false positive"), ("tn", 1, 1, "true negative")]
    cells = []
    for key, row, col, name in layout:
        share = figures[key] / n
        cells.append({"key": key, "name": name, "count": figures[key], "percent": round(100 * share, 1),
                      "x": left + col * size, "y": top + row * size, "fill": _shade(share),
                      "dark": share > 0.45, "cx": left + col * size + size // 2, "cy": top + row * size + size // 2})
    return {"cells": cells, "size": size, "left": left, "top": top, "width": left + 2 * size + 10,
            "height": top + 2 * size + 10}
