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

use serde_json::{Value, json};

use fencesim_sim::catalogue::Defect;
use fencesim_sim::history::{Call, CallOutcome, Disruption, Event, Request, Row, Surface};
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

/// Lease tenures drawn as bars: the open ones by run (lane, epoch, start ms, owner), and those
/// closed by a grant to another holder, a release, a delete or the end of the world.
#[derive(Default)]
struct Tenures {
    open: BTreeMap<String, (String, i64, i64, String)>,
    closed: Vec<Value>,
}

impl Tenures {
    fn close(&mut self, run: &str, t: (String, i64, i64, String), end: i64) {
        self.closed.push(json!({"lane": t.0, "run": run, "epoch": t.1, "from": t.2, "to": end.max(t.2), "owner": t.3}));
    }

    /// An accepted grant opens a tenure (closing the run's last); an accepted release or delete
    /// by its holder (or unleased) closes it.
    fn on_call(&mut self, call: &Call, run: &str, lane: &str, at_ms: i64) {
        if call.surface == Surface::Acquire && call.outcome.is_ok() {
            if let Some(previous) = self.open.remove(run) {
                self.close(run, previous, at_ms);
            }
            if let Some(lease) = &call.lease {
                self.open.insert(run.to_owned(), (lane.to_owned(), lease.epoch.0, at_ms, lease.owner.clone()));
            }
        }
        let ends = matches!(call.surface, Surface::Release | Surface::Delete) && call.outcome.is_ok();
        if ends
            && let Some(t) = self.open.get(run)
            && call.lease.as_ref().is_none_or(|l| l.owner == t.3)
            && let Some(t) = self.open.remove(run)
        {
            self.close(run, t, at_ms);
        }
    }

    /// Every tenure, those still open ending at `end_ms`.
    fn close_all(mut self, end_ms: i64) -> Vec<Value> {
        for (run, t) in std::mem::take(&mut self.open) {
            self.close(&run, t, end_ms);
        }
        self.closed
    }
}

/// How a call is drawn: an accepted mutation, a refusal, a grant, or another call.
fn call_kind(call: &Call) -> &'static str {
    let refused = matches!(call.outcome, CallOutcome::Stale | CallOutcome::RunMismatch | CallOutcome::JournalOrder);
    if call.is_accepted_mutation() {
        "ok"
    } else if refused && call.surface != Surface::Acquire {
        "refused"
    } else if call.surface == Surface::Acquire && call.outcome.is_ok() {
        "grant"
    } else {
        "call"
    }
}

/// Bound the page: the first MAX_ROWS rows and tenures, and every row a violation names; how
/// many rows were left out.
fn bound(rows: &mut Vec<Value>, tenures: &mut Vec<Value>, report: &WorldReport) -> usize {
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
        // Every row a violation names stays on the page (the oracle names rows of this history).
        assert!(
            named.iter().all(|i| rows.iter().any(|r| r["i"].as_u64() == Some(*i as u64))),
            "a row a violation names was left off the page"
        );
    }
    total - rows.len()
}

/// The runs the world's calls name, sorted.
fn runs_of(report: &WorldReport) -> Vec<String> {
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
    runs
}

/// A violation as the page shows it.
fn violation(v: &fencesim_oracle::Violation) -> Value {
    json!({"checker": v.checker, "explanation": v.explanation, "row": v.row, "cause": v.cause})
}

/// The page's data: lanes, rows (with what each draws), tenures and the violations.
fn data(report: &WorldReport, defects: &[Defect]) -> Value {
    let mut lanes: Vec<String> = Vec::new();
    let mut rows = Vec::with_capacity(report.rows.len());
    let mut tenures = Tenures::default();
    let end_ms = report.rows.last().map_or(0, |r| r.at_ms).max(1);
    for row in &report.rows {
        let Row { index, at_ms, node, event, .. } = row;
        let mut lane = lane_of(node);
        let (kind, run, epoch, label): (&str, Option<String>, Option<i64>, String) = match event {
            Event::Call(call) => {
                let run = call.run.to_string();
                let epoch = call.epoch().map(|e| e.0);
                tenures.on_call(call, &run, &lane, *at_ms);
                let kind = call_kind(call);
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
    let mut tenures = tenures.close_all(end_ms);
    let omitted = bound(&mut rows, &mut tenures, report);
    lanes.sort_by_key(|l| lane_rank(l));
    let runs = runs_of(report);
    json!({
        "title": format!("{} seed {}", report.scenario, report.seed),
        "verdict": if report.passed() { "PASS" } else { "FAIL" },
        "db": report.store_name(),
        "defects": defects.iter().map(|d| d.name()).collect::<Vec<_>>(),
        "fingerprint": format!("{:016x}", report.fingerprint),
        "end": end_ms,
        "lanes": lanes,
        "runs": runs,
        "rows": rows,
        "tenures": tenures,
        "violations": report.violations.iter().map(violation).collect::<Vec<_>>(),
        "config": report.config,
        "omitted": omitted,
    })
}

/// The page for one world. What a user controls (a scenario's name, a plan's run ids, a checker's
/// explanation quoting them) reaches the page in two places, each escaped for where it lands:
/// the `<title>` as HTML text ([`html_text`]) and the data as JSON inside a `<script>` element
/// ([`script_json`]). The skeleton is filled in one pass, so a value is never read again as a
/// placeholder (a scenario named `{{DATA}}`).
pub fn html(report: &WorldReport, defects: &[Defect]) -> String {
    let data = script_json(&data(report, defects));
    let title = html_text(&format!("{} seed {}", report.scenario, report.seed));
    fill(PAGE_HTML, &[("{{CSS}}", PAGE_CSS), ("{{SCRIPT}}", PAGE_JS), ("{{TITLE}}", &title), ("{{DATA}}", &data)])
}

/// `template` with each placeholder replaced by its value, in one pass from the start: text a
/// value brings in is never searched for placeholders.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some((at, key, value)) =
        values.iter().filter_map(|(key, value)| rest.find(key).map(|at| (at, *key, *value))).min_by_key(|(at, ..)| *at)
    {
        out.push_str(&rest[..at]);
        out.push_str(value);
        rest = &rest[at + key.len()..];
    }
    out.push_str(rest);
    out
}

/// Text for an HTML element's content or a quoted attribute value: the five markup characters as
/// entities.
pub fn html_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value as JSON that is inert inside a `<script>` element: `<`, `>` and `&` (which could end
/// the element, `</script>`, or open a comment, `<!--`, that changes where it ends) and the line
/// separators U+2028 and U+2029 (line ends to older JavaScript) written as `\uXXXX` escapes. They
/// occur only inside JSON strings, where the escape reads back as the same character: the page's
/// `JSON.parse` sees the value unchanged.
pub fn script_json(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The page's skeleton, style and script: real files under `src/timeline/`, so they can be read
/// and linted as HTML, CSS and JavaScript. [`html`] fills the skeleton's `{{CSS}}`, `{{SCRIPT}}`,
/// `{{TITLE}}` and `{{DATA}}`.
const PAGE_HTML: &str = include_str!("timeline/page.html");
const PAGE_CSS: &str = include_str!("timeline/page.css");
const PAGE_JS: &str = include_str!("timeline/page.js");

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
            adapter: None,
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

    /// A scenario name and run ids a user wrote, made to break the page: each lands escaped for
    /// where it goes. The data still parses as JSON, equal to what the page was given (the
    /// escapes read back as the characters), no `<script>` ends early, nothing opens a comment,
    /// and the title keeps `{{DATA}}` as text. (`tests/it/timeline_browser.rs` renders such a page.)
    #[test]
    fn hostile_names_land_escaped_for_where_they_go() {
        let scenario = fencesim_sim::catalogue::scenario("mid-call-takeover").expect("built in");
        let defect = Defect::parse("non-atomic-fence").expect("a defect");
        let mut file = fencesim_sim::scenario::planfile::PlanFile::draw(&scenario, 1, &[defect]);
        file.scenario = HOSTILE_SCENARIO.to_owned();
        for (run, id) in file.plan.runs.iter_mut().zip(HOSTILE_RUNS) {
            run.id = fencesim_store::RunId::new(id);
        }
        let cfg = fencesim_sim::world::WorldConfig {
            scenario: file.scenario("p.toml"),
            seed: file.seed,
            db: fencesim_sim::stores::DbKind::Memdb,
            store_defects: fencesim_sim::catalogue::Defect::split(&file.defects).1,
            engine_defects: fencesim_sim::catalogue::Defect::split(&file.defects).0,
            keep_db: None,
            adapter: None,
        };
        let report = fencesim_sim::world::run(&cfg).expect("runs");
        let page = html(&report, &file.defects);
        let open = "<script id=\"data\" type=\"application/json\">";
        let start = page.find(open).expect("the data element") + open.len();
        let inside = &page[start..start + page[start..].find("</script>").expect("its end")];
        let parsed: Value = serde_json::from_str(inside).expect("the data is JSON to its end");
        assert_eq!(parsed, data(&report, &file.defects));
        assert!(HOSTILE_RUNS.iter().all(|id| parsed["runs"].as_array().unwrap().contains(&Value::from(*id))));
        for c in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
            assert!(!inside.contains(c), "{c:?} raw in the data");
        }
        assert_eq!(page.matches("<script").count(), 2, "a script element was opened");
        assert_eq!(page.matches("</script>").count(), 2, "a script element was ended early");
        assert!(!page.contains("<!--"), "a comment was opened");
        let title = &page[page.find("<title>").unwrap()..page.find("</title>").unwrap()];
        assert!(title.contains("{{DATA}}") && title.contains("&lt;/title&gt;&lt;!--"), "{title}");
    }

    /// What a user may put in a plan's scenario name and run ids, made to break the page: the
    /// ends and comments of script, title and page, a placeholder, quotes, ampersands and the
    /// JavaScript line separators.
    pub const HOSTILE_SCENARIO: &str = "</title><!--<script>{{DATA}} \u{2028}\u{2029}</script><script>document.title='pwned'</script>'\"&amp;{{TITLE}}";
    pub const HOSTILE_RUNS: [&str; 4] =
        ["<!--<script>", "</script><script>document.title='pwned'</script>", "{{DATA}}", "a&amp;b\"c'd\u{2028}"];

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
