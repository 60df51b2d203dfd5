//! The timeline page: one self-contained HTML file (no network, no external script or font) that
//! draws a world's history. One swimlane per node, virtual time on the x axis; each lease tenure
//! a bar coloured by its epoch; accepted writes as dots, refused calls as crosses; stalls,
//! crashes, takeovers, busy storms, clock jumps, restarts and zombie probes as lettered
//! triangles where they happened; the violation's first divergent row and its cause ringed and
//! joined by a line, with the checker's words above. Filters by run and node; hovering a mark
//! shows its trace row; clicking it scrolls to that row in the list below the picture.
//!
//! The page carries its data as one JSON object and draws SVG from it with a small script (so a
//! 5,000-row world is a few thousand elements, drawn once per filter change). The same report
//! gives the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use fencesim_sim::catalogue::Defect;
use fencesim_sim::history::{CallOutcome, Disruption, Event, Request, Row, Surface};
use fencesim_sim::node::Node;
use fencesim_sim::world::WorldReport;

/// The most trace rows a page draws: a 20,000-run world's page would be tens of megabytes no
/// browser finishes drawing. Past it, the page draws the first rows (and the violation's rows)
/// and says, at its top, how many it left out; the trace printed by `run --trace` has them all.
pub const MAX_ROWS: usize = 20_000;

/// A node label's lane: its name without the incarnation (`w2.3` -> `w2`).
fn lane_of(node: &str) -> String {
    match node.rsplit_once('.') {
        Some((base, n)) if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => base.to_owned(),
        _ => node.to_owned(),
    }
}

/// Lanes in a readable order: workers by number, then the other nodes, the world last.
fn lane_rank(lane: &str) -> (u8, u32, String) {
    match Node::parse(lane) {
        Some(Node::Worker(n)) => (0, n, String::new()),
        node => {
            let rank = node.and_then(|node| Node::OTHERS.iter().position(|n| *n == node));
            (1, rank.map_or(99, |r| r as u32), lane.to_owned())
        }
    }
}

fn fault_letter(kind: Disruption) -> &'static str {
    match kind {
        Disruption::Stall => "S",
        Disruption::Crash => "C",
        Disruption::Takeover => "T",
        Disruption::ClockJump => "J",
        Disruption::Restart => "R",
        Disruption::Zombie => "Z",
        Disruption::Purge => "F",
    }
}

/// The page's data: lanes, rows (with what each draws), tenures and the violations.
fn data(report: &WorldReport, defects: &[Defect]) -> Value {
    let mut lanes: Vec<String> = Vec::new();
    let mut rows = Vec::with_capacity(report.rows.len());
    // Open tenures by run: (lane, epoch, start ms, owner).
    let mut open: BTreeMap<String, (String, i64, i64, String)> = BTreeMap::new();
    let mut tenures = Vec::new();
    let end_ms = report.rows.last().map_or(0, |r| r.at_ms).max(1);
    let close = |tenures: &mut Vec<Value>, run: &str, t: (String, i64, i64, String), end: i64| {
        tenures.push(json!({"lane": t.0, "run": run, "epoch": t.1, "from": t.2, "to": end.max(t.2), "owner": t.3}));
    };
    for row in &report.rows {
        let Row { index, at_ms, node, event, .. } = row;
        let mut lane = lane_of(node);
        let (kind, run, epoch, label): (&str, Option<String>, Option<i64>, String) = match event {
            Event::Call(call) => {
                let run = call.run.to_string();
                let epoch = call.epoch().map(|e| e.0);
                if call.surface == Surface::Acquire && call.outcome.is_ok() {
                    if let Some(previous) = open.remove(&run) {
                        close(&mut tenures, &run, previous, *at_ms);
                    }
                    if let Some(lease) = &call.lease {
                        open.insert(run.clone(), (lane.clone(), lease.epoch.0, *at_ms, lease.owner.clone()));
                    }
                }
                let ends = (call.surface == Surface::Release && call.outcome.is_ok())
                    || (call.surface == Surface::Delete && call.outcome.is_ok());
                if ends
                    && let Some(t) = open.get(&run)
                    && call.lease.as_ref().is_none_or(|l| l.owner == t.3)
                    && let Some(t) = open.remove(&run)
                {
                    close(&mut tenures, &run, t, *at_ms);
                }
                let refused =
                    matches!(call.outcome, CallOutcome::Stale | CallOutcome::RunMismatch | CallOutcome::JournalOrder);
                let kind = if call.is_accepted_mutation() {
                    "ok"
                } else if refused && call.surface != Surface::Acquire {
                    "refused"
                } else if call.surface == Surface::Acquire && call.outcome.is_ok() {
                    "grant"
                } else {
                    "call"
                };
                (kind, Some(run), epoch, call.surface.as_str().to_owned())
            }
            Event::Fault { kind, run, epoch, detail } => {
                // The world's own events name their node first (`w2 +300ms`, `w1 stops ...`).
                if Node::parse(&lane) == Some(Node::World)
                    && let Some(first) = detail.split_whitespace().next()
                {
                    lane = lane_of(first);
                }
                ("fault", run.as_ref().map(ToString::to_string), epoch.map(|e| e.0), fault_letter(*kind).to_owned())
            }
            Event::Effect(_) => ("effect", None, None, String::new()),
            Event::Outcome { run, .. } => ("outcome", Some(run.to_string()), None, String::new()),
            Event::Repair { run, .. } | Event::Request(Request::Cancel { run }) => {
                ("note", Some(run.to_string()), None, String::new())
            }
            Event::Request(Request::Stop) => ("note", None, None, String::new()),
            Event::Note(text) => {
                let restart = text.contains("restart") || text.contains("crash") || text.contains("starts");
                (
                    if restart && Node::parse(&lane) != Some(Node::World) { "restart" } else { "note" },
                    None,
                    None,
                    String::new(),
                )
            }
        };
        if !lanes.contains(&lane) {
            lanes.push(lane.clone());
        }
        rows.push(json!({
            "i": index, "t": at_ms, "lane": lane, "k": kind, "run": run, "e": epoch, "l": label,
            "text": row.to_string(),
        }));
    }
    for (run, t) in std::mem::take(&mut open) {
        close(&mut tenures, &run, t, end_ms);
    }
    // Bounded: the first MAX_ROWS rows, and every row a violation names.
    let total = rows.len();
    if total > MAX_ROWS {
        let named: std::collections::BTreeSet<usize> =
            report.violations.iter().flat_map(|v| [v.row, v.cause]).flatten().collect();
        let mut n = 0;
        rows.retain(|r| {
            n += 1;
            n <= MAX_ROWS || r["i"].as_u64().is_some_and(|i| named.contains(&(i as usize)))
        });
        tenures.truncate(MAX_ROWS);
    }
    let omitted = total - rows.len();
    lanes.sort_by_key(|l| lane_rank(l));
    let mut runs: Vec<String> = report
        .rows
        .iter()
        .filter_map(Row::call)
        .map(|c| c.run.to_string())
        .filter(|r| r != "*")
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    runs.sort();
    let violations: Vec<Value> = report
        .violations
        .iter()
        .map(|v| json!({"checker": v.checker, "explanation": v.explanation, "row": v.row, "cause": v.cause}))
        .collect();
    json!({
        "title": format!("{} seed {}", report.scenario, report.seed),
        "verdict": if report.passed() { "PASS" } else { "FAIL" },
        "db": report.db.as_str(),
        "defects": defects.iter().map(|d| d.name()).collect::<Vec<_>>(),
        "fingerprint": format!("{:016x}", report.fingerprint),
        "end": end_ms,
        "lanes": lanes,
        "runs": runs,
        "rows": rows,
        "tenures": tenures,
        "violations": violations,
        "config": report.config,
        "omitted": omitted,
    })
}

/// The page for one world.
pub fn html(report: &WorldReport, defects: &[Defect]) -> String {
    let data = data(report, defects).to_string().replace("</", "<\\/").replace("<!--", "<\\!--");
    let mut out = String::with_capacity(data.len() + PAGE.len() + 64);
    let title = format!("{} seed {}", report.scenario, report.seed)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let _ = write!(out, "{}", PAGE.replace("{{TITLE}}", &title).replace("{{DATA}}", &data));
    out
}

const PAGE: &str = r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>fencesim timeline: {{TITLE}}</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 12px; color: #222; }
h1 { font-size: 16px; margin: 0 0 6px; }
#violation { background: #fde8e8; border: 2px solid #c0392b; padding: 6px 10px; margin: 6px 0; font-weight: 600; }
#violation.none { background: #e8f6ec; border-color: #2e8b57; }
#controls { margin: 6px 0; }
#controls label { margin-right: 14px; }
#picture { overflow-x: auto; border: 1px solid #ccc; }
svg text { font: 11px system-ui, sans-serif; }
.lane-bg { fill: #fafafa; stroke: #e4e4e4; }
.lane-label { font-weight: 600; }
.tenure { opacity: 0.55; }
.mark { cursor: pointer; }
.ok { fill: #1f6fb2; }
.grant { fill: #2e8b57; }
.refused { stroke: #c0392b; stroke-width: 2; fill: none; }
.fault { fill: #e67e22; }
.restart { fill: #8e44ad; }
.violation-row, .violation-cause { fill: none; stroke: #c0392b; stroke-width: 3; }
#violation-link { stroke: #c0392b; stroke-width: 2; stroke-dasharray: 5 3; }
#legend span { margin-right: 12px; }
#rows { font: 12px/1.35 ui-monospace, monospace; max-height: 420px; overflow-y: auto; border: 1px solid #ccc; margin-top: 8px; white-space: pre; }
#rows div { padding: 0 4px; }
#rows div.hit { background: #fde8e8; }
#rows div.cause { background: #fff3d6; }
#rows div.picked { outline: 2px solid #1f6fb2; }
</style>
</head>
<body>
<h1 id="title"></h1>
<div id="violation"></div>
<div id="controls">
<label>run <select id="run-filter"><option value="">all</option></select></label>
<label>node <select id="node-filter"><option value="">all</option></select></label>
<label>zoom <select id="zoom"><option>1</option><option>2</option><option>4</option><option>8</option><option>16</option></select></label>
<span id="legend"><span>&#9644; tenure (colour = epoch)</span><span style="color:#1f6fb2">&#9679; accepted write</span><span style="color:#c0392b">&#10005; refused</span><span style="color:#2e8b57">&#9679; lease granted</span><span style="color:#e67e22">&#9650; fault (S stall, C crash, T takeover, J clock jump, R restart, Z zombie, F purge)</span><span style="color:#8e44ad">&#9670; node (re)start</span></span>
</div>
<div id="picture"></div>
<div id="rows"></div>
<script id="data" type="application/json">{{DATA}}</script>
<script>
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
</script>
</body>
</html>
"##;

#[cfg(test)]
mod tests {
    use super::*;

    /// A world of more rows than a page may draw gives a bounded page that says so; its rows past
    /// the bound are left out (the page of a 20,000-run plan was 60 MB before).
    #[test]
    fn a_page_of_a_huge_world_is_bounded_and_says_what_it_left_out() {
        let scenario = fencesim_sim::catalogue::scenario("swarm").expect("built in");
        let cfg = fencesim_sim::world::WorldConfig {
            scenario,
            seed: 1,
            db: fencesim_sim::stores::DbKind::Memdb,
            store_defects: Default::default(),
            engine_defects: Default::default(),
            keep_db: None,
        };
        let mut report = fencesim_sim::world::run(&cfg).expect("runs");
        let small = html(&report, &[]).len();
        let one = report.rows.clone();
        let copies = MAX_ROWS / one.len() + 2;
        report.rows = (0..copies).flat_map(|_| one.iter().cloned()).collect();
        for (i, row) in report.rows.iter_mut().enumerate() {
            row.index = i;
        }
        let total = report.rows.len();
        let page = html(&report, &[]);
        let data = data(&report, &[]);
        assert_eq!(data["rows"].as_array().map(Vec::len), Some(MAX_ROWS));
        assert_eq!(data["omitted"].as_u64(), Some((total - MAX_ROWS) as u64));
        assert!(page.contains("rows not drawn"), "no note in the page");
        let per_row = small / one.len() + 1;
        assert!(page.len() < per_row * (MAX_ROWS + 1000), "{} bytes for {total} rows", page.len());
    }

    #[test]
    fn lanes_drop_the_incarnation_and_sort_workers_first() {
        assert_eq!(lane_of("w12.3"), "w12");
        assert_eq!(lane_of("client.1"), "client");
        assert_eq!(lane_of("usurper"), "usurper");
        let mut lanes = vec!["world", "client", "w10", "w2", "usurper"];
        lanes.sort_by_key(|l| lane_rank(l));
        assert_eq!(lanes, ["w2", "w10", "client", "usurper", "world"]);
    }
}
