"""The trajectory viewer: one page, ``trajectories/viewer.html``, and one data file per recorded episode.

``viewer.html?episode=ID`` loads ``ID.js`` (the episode as one JSON object assigned to ``window.TRAJECTORY``) with a
script tag, which browsers allow from ``file://`` too, so the leaderboard works straight from disk. The page steps
through the episode: the observation, every legal action with the policy's probability (exact in score mode;
uniform for ``random``), the chosen action, the reward, the running return and the value estimate where the policy
has one (and then a chart of it over the episode, its axes labelled, marking the current step). Observation text
wraps rather than being cut at the column's edge. Keys: left/right arrows. The viewer is written once, not copied
into every episode's page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_gym.bench.store import EpisodeRow

VIEWER = "viewer.html"

_SCRIPT = """
function start() {
const data = window.TRAJECTORY;
document.title = data.title;
document.getElementById('title').textContent = data.title;
document.getElementById('summary').textContent = data.summary;
const steps = data.steps;
const slider = document.getElementById('step');
slider.max = Math.max(0, steps.length - 1);
// The value estimate over the episode (policies with a value head): one polyline with labelled axes (the value on
// the left, the step below), a marker at the current step.
const valued = steps.map((s, k) => [k, s.value]).filter(p => typeof p[1] === 'number');
const chart = document.getElementById('values');
let marker = null;
if (valued.length) {
  const W = 640, H = 150, L = 64, R = 12, T = 10, B = 34;
  const lo = Math.min(...valued.map(p => p[1])), hi = Math.max(...valued.map(p => p[1]));
  const last = Math.max(1, steps.length - 1);
  const x = k => L + (W - L - R) * k / last;
  const y = v => H - B - (H - T - B) * (hi > lo ? (v - lo) / (hi - lo) : 0.5);
  const ns = 'http://www.w3.org/2000/svg';
  const make = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const axes = [make('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#888'}),
                make('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#888'})];
  const ticks = [];
  for (const v of (hi > lo ? [lo, (lo + hi) / 2, hi] : [lo])) {
    ticks.push(make('line', {x1: L - 4, y1: y(v), x2: L, y2: y(v), stroke: '#888'}));
    ticks.push(make('text', {x: L - 7, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11}, v.toFixed(3)));
  }
  for (const k of [...new Set([0, Math.round(last / 2), last])]) {
    ticks.push(make('line', {x1: x(k), y1: H - B, x2: x(k), y2: H - B + 4, stroke: '#888'}));
    ticks.push(make('text', {x: x(k), y: H - B + 16, 'text-anchor': 'middle', 'font-size': 11}, String(k + 1)));
  }
  const titles = [make('text', {x: (L + W - R) / 2, y: H - 3, 'text-anchor': 'middle', 'font-size': 11}, 'step'),
                  make('text', {x: 12, y: (T + H - B) / 2, 'text-anchor': 'middle', 'font-size': 11,
                                transform: `rotate(-90 12 ${(T + H - B) / 2})`}, 'value estimate')];
  const line = make('polyline', {points: valued.map(p => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' '),
                                 fill: 'none', stroke: '#1f5fa8'});
  marker = make('line', {y1: T, y2: H - B, stroke: '#c0392b'});
  chart.append(...axes, ...ticks, ...titles, line, marker);
  chart.setAttribute('viewBox', `0 0 ${W} ${H}`);
  chart.setAttribute('width', W); chart.setAttribute('height', H);
  document.getElementById('valuerange').textContent =
    `the policy's value estimate at each step, ${lo.toFixed(3)} to ${hi.toFixed(3)}; the red line is the step shown`;
  marker.x = x;
} else {
  chart.style.display = 'none';
}
function esc(s) { const d = document.createElement('div'); d.textContent = String(s); return d.innerHTML; }
function show(i) {
  const s = steps[i];
  let total = 0; for (let k = 0; k <= i; k++) total += steps[k].reward;
  document.getElementById('where').textContent = `step ${i + 1} of ${steps.length}`;
  document.getElementById('obs').textContent = s.observation;
  const facts = [`action: ${typeof s.action === 'number' && s.legal_ids.indexOf(s.action) >= 0
      ? s.legal[s.legal_ids.indexOf(s.action)] + ' (id ' + s.action + ')' : s.action}`,
    `reward: ${s.reward}`, `return so far: ${total.toFixed(3)}`];
  if (s.value !== undefined) facts.push(`value estimate: ${Number(s.value).toFixed(3)}`);
  if (s.score !== undefined) facts.push(`score: ${s.score}`);
  document.getElementById('facts').innerHTML = facts.map(f => `<li>${esc(f)}</li>`).join('');
  let rows = '';
  s.legal.forEach((name, k) => {
    const p = s.probs ? s.probs[k] : null;
    const chosen = s.legal_ids[k] === s.action;
    const bar = p === null ? '' : `<span class="bar" style="width:${(p * 200).toFixed(1)}px"></span>`;
    rows += `<tr class="${chosen ? 'chosen' : ''}"><td>${esc(name)}</td>` +
      `<td>${p === null ? '–' : p.toFixed(4)}</td><td>${bar}</td></tr>`;
  });
  document.getElementById('legal').innerHTML = rows || '<tr><td colspan="3">(free-text action)</td></tr>';
  const extra = [];
  if (s.answer !== undefined) extra.push('model answer:\\n' + s.answer);
  if (s.expected !== undefined) extra.push('expected:\\n' + s.expected);
  if (s.diff) extra.push('diff:\\n' + s.diff);
  const box = document.getElementById('extra');
  box.textContent = extra.join('\\n\\n');
  box.style.display = extra.length ? '' : 'none';
  slider.value = i;
  if (marker) { marker.setAttribute('x1', marker.x(i)); marker.setAttribute('x2', marker.x(i)); }
}
slider.addEventListener('input', () => show(Number(slider.value)));
document.getElementById('prev').addEventListener('click', () => show(Math.max(0, Number(slider.value) - 1)));
document.getElementById('next').addEventListener('click', () => show(Math.min(steps.length - 1, Number(slider.value) + 1)));
document.addEventListener('keydown', e => {
  if (e.key === 'ArrowLeft') document.getElementById('prev').click();
  if (e.key === 'ArrowRight') document.getElementById('next').click();
});
if (steps.length) show(0);
}
const episode = new URLSearchParams(location.search).get('episode');
if (episode && /^[0-9]+$/.test(episode)) {
  const tag = document.createElement('script');
  tag.src = episode + '.js';
  tag.onload = start;
  tag.onerror = () => { document.getElementById('title').textContent = `no recorded episode ${episode}`; };
  document.body.appendChild(tag);
} else {
  document.getElementById('title').textContent = 'open this page as viewer.html?episode=ID (links on the leaderboard)';
}
"""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; }
pre { background: #f6f8fa; padding: .8em; white-space: pre-wrap; overflow-wrap: anywhere; }
.cols { display: flex; gap: 2em; flex-wrap: wrap; } .cols > div { flex: 1; min-width: 20em; }
.cols > div.observation { flex: 3; min-width: 48em; } .cols > div.decision { flex: 2; }
table { border-collapse: collapse; } td { border-bottom: 1px solid #eee; padding: 2px 8px; }
tr.chosen td { background: #e3efff; font-weight: 600; }
.bar { display: inline-block; height: 10px; background: #1f5fa8; }
#values { background: #fafbfc; border: 1px solid #eee; }
"""


def viewer_link(episode_id: int) -> str:
    """The viewer URL of one episode, relative to the leaderboard's folder."""
    return f"trajectories/{VIEWER}?episode={episode_id}"


def write_viewer(directory: Path) -> Path:
    """Write the one viewer page into ``directory`` (the leaderboard's ``trajectories/``)."""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trajectory</title><style>{_STYLE}</style></head>
<body>
<p><a href="../index.html">leaderboard</a></p>
<h1 id="title"></h1>
<p id="summary"></p>
<p><button id="prev">&larr; prev</button> <input id="step" type="range" min="0" value="0" style="width:60%">
<button id="next">next &rarr;</button> <span id="where"></span></p>
<svg id="values" width="640" height="150" role="img" aria-label="value estimate per step"></svg>
<p id="valuerange"></p>
<div class="cols">
<div class="observation"><h3>Observation</h3><pre id="obs"></pre><pre id="extra"></pre></div>
<div class="decision"><h3>Decision</h3><ul id="facts"></ul>
<table><thead><tr><th>legal action</th><th>probability</th><th></th></tr></thead><tbody id="legal"></tbody></table></div>
</div>
<script>{_SCRIPT}</script>
</body></html>
"""
    out = directory / VIEWER
    out.write_text(page)
    return out


def write_episode(row: EpisodeRow, trajectory: dict[str, Any], directory: Path) -> Path:
    """Write one stored episode's data file (``<id>.js``) for the viewer."""
    recorded = len(trajectory.get("steps", []))
    summary = (
        f"return {row.episode_return:g}, length {row.length}{' (cut)' if row.truncated else ''}, "
        f"task id {'–' if row.task_id is None else row.task_id}, env {row.env_id}, agent {row.agent}"
        + (f"; the first {recorded} of {row.length} steps were recorded" if recorded < row.length else "")
    )
    data = {
        "title": f"{row.entry} on {row.env_label}, seed {row.seed}",
        "summary": summary,
        "steps": trajectory.get("steps", []),
    }
    # One line of JSON: "</" is escaped so no text in an observation can close a script element.
    out = directory / f"{row.id}.js"
    out.write_text("window.TRAJECTORY = " + json.dumps(data).replace("</", "<\\/") + ";\n")
    return out
