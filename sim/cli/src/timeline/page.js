"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
const LANE = 34, LEFT = 90, TOP = 34;
const byIndex = new Map(D.rows.map(r => [r.i, r]));
const v = D.violations[0];
document.getElementById("title").textContent =
  `${D.title} — ${D.verdict} — db ${D.db}` + (D.defects.length ? ` — defects ${D.defects.join(", ")}` : "") + ` — fingerprint ${D.fingerprint}` +
  (D.omitted ? ` — ${D.omitted} of ${D.omitted + D.rows.length} rows not drawn (the page draws at most the first ${D.rows.length}; run --trace prints them all)` : "");
const vbox = document.getElementById("violation");
if (v) {
  vbox.textContent = `VIOLATION ${v.checker}: ${v.explanation}` + (D.violations.length > 1 ? ` (and ${D.violations.length - 1} more)` : "");
} else {
  vbox.textContent = "no violation: every checker passed";
  vbox.className = "none";
}
for (const [id, values] of [["run-filter", D.runs], ["node-filter", D.lanes]]) {
  const sel = document.getElementById(id);
  for (const x of values) { const o = document.createElement("option"); o.value = o.textContent = x; sel.appendChild(o); }
}
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function colour(epoch) { return `hsl(${(epoch * 67) % 360}, 65%, 55%)`; }
function pick(i) {
  const div = document.getElementById("row-" + i);
  if (!div) return;
  document.querySelectorAll("#rows .picked").forEach(d => d.classList.remove("picked"));
  div.classList.add("picked");
  div.scrollIntoView({ block: "center" });
}
function draw() {
  const run = document.getElementById("run-filter").value;
  const node = document.getElementById("node-filter").value;
  const zoom = Number(document.getElementById("zoom").value);
  const lanes = D.lanes.filter(l => !node || l === node);
  const laneY = new Map(lanes.map((l, n) => [l, TOP + n * LANE]));
  const width = Math.max(1100, document.body.clientWidth - 40) * zoom;
  const span = width - LEFT - 20;
  const x = t => LEFT + (t / D.end) * span;
  const visible = r => laneY.has(r.lane) && (!run || r.run === run);
  const pic = document.getElementById("picture");
  pic.textContent = "";
  const svg = el("svg", { width, height: TOP + lanes.length * LANE + 10, id: "timeline" }, pic);
  for (const l of lanes) {
    const y = laneY.get(l);
    el("rect", { x: 0, y, width, height: LANE - 2, class: "lane-bg lane", "data-lane": l }, svg);
    el("text", { x: 4, y: y + LANE / 2 + 4, class: "lane-label" }, svg).textContent = l;
  }
  const step = Math.pow(10, Math.floor(Math.log10(Math.max(D.end, 10) / (6 * zoom))));
  for (let t = 0; t <= D.end; t += step * (D.end / step / zoom > 12 ? 5 : 1)) {
    el("line", { x1: x(t), x2: x(t), y1: TOP - 4, y2: TOP + lanes.length * LANE, stroke: "#eee" }, svg);
    el("text", { x: x(t) + 2, y: TOP - 6, fill: "#777" }, svg).textContent = (t / 1000).toFixed(t % 1000 ? 2 : 0) + "s";
  }
  for (const b of D.tenures) {
    if (!laneY.has(b.lane) || (run && b.run !== run)) continue;
    const r = el("rect", { x: x(b.from), y: laneY.get(b.lane) + 4, width: Math.max(2, x(b.to) - x(b.from)), height: LANE - 10,
      fill: colour(b.epoch), class: "tenure", "data-run": b.run }, svg);
    el("title", {}, r).textContent = `${b.run} held by ${b.owner} at epoch ${b.epoch}, ${b.from}-${b.to} ms`;
  }
  const marks = el("g", { id: "marks" }, svg);
  for (const r of D.rows) {
    if (!visible(r)) continue;
    const cx = x(r.t), cy = laneY.get(r.lane) + LANE / 2 - 1;
    let m;
    if (r.k === "ok") m = el("circle", { cx, cy, r: 3.2, class: "mark ok" }, marks);
    else if (r.k === "grant") m = el("circle", { cx, cy: cy + 8, r: 2.5, class: "mark grant" }, marks);
    else if (r.k === "refused") m = el("path", { d: `M${cx - 4},${cy - 4}L${cx + 4},${cy + 4}M${cx - 4},${cy + 4}L${cx + 4},${cy - 4}`, class: "mark refused" }, marks);
    else if (r.k === "fault") {
      m = el("path", { d: `M${cx},${cy - 13}L${cx - 5},${cy - 4}L${cx + 5},${cy - 4}Z`, class: "mark fault" }, marks);
      el("text", { x: cx + 6, y: cy - 5, fill: "#b35900" }, marks).textContent = r.l;
    } else if (r.k === "restart") m = el("path", { d: `M${cx},${cy - 6}L${cx + 5},${cy}L${cx},${cy + 6}L${cx - 5},${cy}Z`, class: "mark restart" }, marks);
    else continue;
    m.setAttribute("data-row", r.i);
    el("title", {}, m).textContent = r.text;
    m.addEventListener("click", () => pick(r.i));
  }
  if (v) {
    const at = i => { const r = byIndex.get(i); return r && laneY.has(r.lane) ? [x(r.t), laneY.get(r.lane) + LANE / 2 - 1] : null; };
    const a = v.row == null ? null : at(v.row), c = v.cause == null ? null : at(v.cause);
    if (a && c) el("line", { x1: c[0], y1: c[1], x2: a[0], y2: a[1], id: "violation-link" }, svg);
    if (c) { const m = el("circle", { cx: c[0], cy: c[1], r: 9, class: "violation-cause mark", "data-row": v.cause }, svg); el("title", {}, m).textContent = "caused by: " + byIndex.get(v.cause).text; m.addEventListener("click", () => pick(v.cause)); }
    if (a) {
      const m = el("circle", { cx: a[0], cy: a[1], r: 9, class: "violation-row mark", "data-row": v.row }, svg);
      el("title", {}, m).textContent = "first divergent row: " + byIndex.get(v.row).text;
      m.addEventListener("click", () => pick(v.row));
      const label = el("text", { x: Math.min(a[0] + 12, width - 360), y: Math.max(a[1] - 12, 12), fill: "#c0392b", "font-weight": 700, id: "violation-label" }, svg);
      label.textContent = v.checker;
    }
  }
  const list = document.getElementById("rows");
  list.textContent = "";
  const frag = document.createDocumentFragment();
  for (const r of D.rows) {
    if (node && r.lane !== node) continue;
    if (run && r.run !== run && r.k !== "fault" && r.k !== "note") continue;
    const div = document.createElement("div");
    div.id = "row-" + r.i;
    div.textContent = r.text;
    if (v && r.i === v.row) div.className = "hit";
    if (v && r.i === v.cause) div.className = "cause";
    frag.appendChild(div);
  }
  list.appendChild(frag);
}
for (const id of ["run-filter", "node-filter", "zoom"]) document.getElementById(id).addEventListener("change", draw);
draw();
