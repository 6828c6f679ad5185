"""Draw a curriculum run's TensorBoard curves as an SVG for docs/guides/curriculum.md (no plotting library needed).

    python docs/guides/curriculum_figure.py RUN_DIR docs/guides/curriculum-leduc.svg

Top: the success rate over the current stage's window after each update, one colour per stage, with each stage's
threshold dashed. Bottom: the failure buffer's size. Prints the points it drew as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

WIDTH, HEIGHT, PAD = 720, 420, 50
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def polyline(points: list[tuple[float, float]], colour: str, dashed: bool = False) -> str:
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    return f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}"/>'


def main(run: Path, out: Path) -> None:
    data = scalars(run)
    summary = json.loads((run / "summary.json").read_text())
    stages = summary["curriculum"]["stages"]
    last_step = max(step for series in data.values() for step, _ in series) or 1
    top, bottom = (PAD, HEIGHT * 0.62), (HEIGHT * 0.72, HEIGHT - PAD)

    def x(step: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * step / last_step

    def y(value: float, band: tuple[float, float], high: float = 1.0) -> float:
        return band[1] - (band[1] - band[0]) * value / high

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-size="12">']
    parts.append(f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>')
    drawn: dict[str, list] = {}
    for i, stage in enumerate(stages):
        colour = COLOURS[i % len(COLOURS)]
        series = data.get(f"curriculum/success_rate/{stage['name']}", [])
        drawn[stage["name"]] = series
        if series:
            parts.append(polyline([(x(s), y(v, top)) for s, v in series], colour))
        parts.append(
            polyline([(x(0), y(stage["threshold"], top)), (x(last_step), y(stage["threshold"], top))], colour, True)
        )
        parts.append(
            f'<text x="{WIDTH - PAD + 4}" y="{y(stage["threshold"], top) + 4:.1f}" fill="{colour}">{stage["name"]}</text>'
        )
    buffer = data.get("curriculum/buffer_size", [])
    high = max([v for _, v in buffer] + [1.0])
    if buffer:
        parts.append(polyline([(x(s), y(v, bottom, high)) for s, v in buffer], "#555555"))
    for label, value, band, scale in (("1.0", 1.0, top, 1.0), ("0", 0.0, top, 1.0), (f"{high:g}", high, bottom, high)):
        parts.append(f'<text x="{PAD - 30}" y="{y(value, band, scale) + 4:.1f}">{label}</text>')
    parts.append(f'<text x="{PAD}" y="{top[0] - 10}">success rate over the stage window (dashed: threshold)</text>')
    parts.append(f'<text x="{PAD}" y="{bottom[0] - 8:.1f}">failure buffer size</text>')
    parts.append(f'<text x="{WIDTH / 2 - 40}" y="{HEIGHT - 15}">env steps (0 - {last_step})</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")
    print(json.dumps({"success_rate": drawn, "buffer_size": buffer, "events": summary["curriculum"]["events"]}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
