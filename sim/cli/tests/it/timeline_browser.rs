//! The timeline page in a real browser: `fencesim run --html` writes it, headless Chromium
//! renders it (`--dump-dom` gives the DOM after the page's script ran), and the DOM must hold the
//! swimlanes, the marks (accepted writes, refused crosses, faults), the highlighted violation
//! (ringed row and cause joined by a line, the checker's words above) and every trace row; a
//! world of more than 5,000 rows must render too.
//!
//! These tests need Chromium (`.ci/run` installs Debian's `chromium`): with `CI` set they run, and
//! fail without it; elsewhere they are reported as ignored, with that reason (`cargo test --
//! --ignored` runs them). They never pass without rendering (docs/tests.md, "What a test needs").

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fencesim_sim::catalogue;
use fencesim_sim::scenario::planfile::PlanFile;
use fencesim_store::RunId;

use crate::cli;

use cli::{assert_exit, fencesim, need, program};

/// Chromium (Debian's `chromium`, or the headless shell), or Google Chrome (GitHub's runners).
fn chromium() -> PathBuf {
    need(
        program(&["chromium", "chromium-headless-shell", "chromium-browser", "google-chrome", "google-chrome-stable"]),
        "Chromium (apt-get install chromium)",
    )
}

/// Render `page` headless and return the DOM after scripts ran (or write a screenshot).
#[allow(clippy::disallowed_methods, reason = "a test waits in wall time for a real browser")]
fn render(browser: &Path, page: &Path, screenshot: Option<&Path>) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("--user-data-dir={}", profile.path().display()));
    match screenshot {
        Some(png) => {
            args.push(format!("--screenshot={}", png.display()));
            args.push("--window-size=1280,800".into());
        }
        None => args.push("--dump-dom".into()),
    }
    args.push(format!("file://{}", page.display()));
    // The browser dies with this test (setpriv's parent-death signal) and after 120 s at most.
    let mut command = if Path::new("/usr/bin/setpriv").is_file() {
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--pdeathsig", "KILL", "--"]).arg(browser);
        c
    } else {
        Command::new(browser)
    };
    let mut child =
        command.args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish rendering {} in 120 s", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

#[test]
#[cfg_attr(not(fencesim_ci), ignore = "needs Chromium (apt-get install chromium); runs under CI, or with --ignored")]
fn the_timeline_renders_lanes_marks_and_the_violation() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("t.html");
    let out = fencesim(&[
        "run",
        "--scenario",
        "mid-call-takeover",
        "--seed",
        "1",
        "--defect",
        "non-atomic-fence",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_exit(&out, 1);
    let dom = render(&browser, &page, None);
    assert!(count(&dom, "class=\"lane-bg lane\"") >= 4, "swimlanes missing");
    for lane in ["data-lane=\"w1\"", "data-lane=\"client\"", "data-lane=\"usurper\""] {
        assert!(dom.contains(lane), "{lane} missing");
    }
    assert!(count(&dom, "class=\"mark ok\"") > 20, "accepted writes missing");
    assert!(count(&dom, "class=\"mark refused\"") > 0, "refused crosses missing");
    assert!(count(&dom, "class=\"mark fault\"") > 0, "faults missing");
    assert!(count(&dom, "class=\"tenure\"") > 5, "tenures missing");
    assert!(dom.contains("id=\"violation-link\""), "the violation's line missing");
    assert!(dom.contains("class=\"violation-row mark\"") && dom.contains("class=\"violation-cause mark\""));
    assert!(dom.contains("<div id=\"violation\">VIOLATION no-stale-acceptance: put_meta on r02"), "checker's words");
    assert!(dom.contains("class=\"hit\""), "the divergent row is not marked in the list");
    let rows = count(&dom, "<div id=\"row-");
    assert!(rows > 300, "{rows} trace rows listed");
    // The only URL in the page is the SVG namespace; nothing is loaded from anywhere.
    for resource in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!dom.contains(resource), "a network resource: {resource}");
    }

    // A passing world draws too, with no violation.
    let clean = dir.path().join("clean.html");
    assert_exit(&fencesim(&["run", "--scenario", "swarm", "--seed", "2", "--html", clean.to_str().unwrap()]), 0);
    let dom = render(&browser, &clean, None);
    assert!(dom.contains("no violation: every checker passed"));
    assert!(!dom.contains("id=\"violation-link\""));
}

#[test]
#[cfg_attr(not(fencesim_ci), ignore = "needs Chromium (apt-get install chromium); runs under CI, or with --ignored")]
fn a_world_of_5000_rows_renders() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let scenario = catalogue::scenario("swarm").unwrap();
    let mut file = PlanFile::draw(&scenario, 4, &[]);
    let base = file.plan.runs.clone();
    file.plan.runs = (0..140)
        .map(|i| {
            let mut r = base[i % base.len()].clone();
            r.id = RunId::new(format!("r{:03}", i + 1));
            r
        })
        .collect();
    let plan = dir.path().join("big.toml");
    std::fs::write(&plan, file.to_toml()).unwrap();
    let page = dir.path().join("big.html");
    let out =
        fencesim(&["run", "--plan", plan.to_str().unwrap(), "--html", page.to_str().unwrap(), "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["counters"]["rows"].as_u64().unwrap();
    assert!(rows >= 5_000, "only {rows} rows");
    #[allow(clippy::disallowed_methods, reason = "measures the browser in wall time")]
    let started = Instant::now();
    let dom = render(&browser, &page, None);
    let listed = count(&dom, "<div id=\"row-") as u64;
    assert_eq!(listed, rows, "every row listed");
    assert!(count(&dom, "class=\"mark ok\"") > 1_000);
    #[allow(clippy::disallowed_methods, reason = "measures the browser in wall time")]
    let seconds = started.elapsed().as_secs_f64();
    assert!(seconds < 60.0, "rendering {rows} rows took {seconds:.1} s");
}

/// A scenario name and run ids made to break the page (the ends and comments of script, title
/// and page, a placeholder, quotes, ampersands, the JavaScript line separators), written into a
/// plan: the page still renders whole, every hostile name shows as text (the title, the run
/// filter), and nothing it carried ran or became an element.
#[test]
#[cfg_attr(not(fencesim_ci), ignore = "needs Chromium (apt-get install chromium); runs under CI, or with --ignored")]
fn hostile_names_render_as_text() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let scenario = catalogue::scenario("mid-call-takeover").unwrap();
    let defect = fencesim_sim::catalogue::Defect::parse("non-atomic-fence").unwrap();
    let mut file = PlanFile::draw(&scenario, 1, &[defect]);
    file.scenario = "</title><!--<script>{{DATA}} \u{2028}\u{2029}</script><script>document.title='pwned'</script>'\"&amp;{{TITLE}}".into();
    // A run id may hold no whitespace (U+2028 is whitespace): it goes in the scenario's name.
    let runs = ["<!--<script>", "</script><script>document.title='pwned'</script>", "{{DATA}}", "a&amp;b\"c'd"];
    for (run, id) in file.plan.runs.iter_mut().zip(runs) {
        run.id = RunId::new(id);
    }
    let plan = dir.path().join("hostile.toml");
    std::fs::write(&plan, file.to_toml()).unwrap();
    let page = dir.path().join("hostile.html");
    let out = fencesim(&["run", "--plan", plan.to_str().unwrap(), "--html", page.to_str().unwrap()]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let dom = render(&browser, &page, None);
    // Rendered whole: the script parsed its data and drew.
    assert!(count(&dom, "class=\"lane-bg lane\"") >= 3, "no swimlanes: the page did not render");
    assert!(count(&dom, "<div id=\"row-") > 100, "the trace rows are missing");
    // Every hostile name is text, as written: in the heading and in the run filter.
    let text = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    assert!(dom.contains(&text("</title><!--<script>{{DATA}}")), "the scenario's name is not in the page as text");
    for id in runs {
        assert!(dom.contains(&format!(">{}</option>", text(id))), "run {id} is not in the run filter as text");
    }
    // Nothing ran or became an element: two scripts (the data and the page's), the title untouched.
    assert_eq!(count(&dom, "<script"), 2, "a script element was injected");
    assert!(!dom.contains("<title>pwned</title>"), "an injected script ran");
}
