//! The modes of the files fencesim writes: under any umask, each output (a plan, a report, a
//! timeline page, a kept database, a bundle and every file in it) has the mode a plain write of
//! it would have had, `0666 & !umask` (`repro.sh`, a script, `0777 & !umask`), and a folder a
//! plain `mkdir`'s: never a temporary file's private `0600`. The umask is set in a child shell,
//! which also makes the plain file, script and folder each output is compared with.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use crate::cli;

use cli::{assert_exit, stderr};

/// Run `fencesim args` in `dir` from a shell that first sets `umask` and makes the references a
/// plain write gives under it: `plain` (a file), `plain.sh` (a file made executable) and
/// `plain.d` (a folder).
fn under_umask(dir: &Path, umask: u32, args: &[&str]) -> std::process::Output {
    let script = format!(
        "umask {umask:03o} && : > plain && : > plain.sh && chmod +x plain.sh && mkdir -p plain.d && exec \"$0\" \"$@\""
    );
    Command::new("sh")
        .current_dir(dir)
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .output()
        .expect("run fencesim under a umask")
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o7777
}

#[test]
fn every_output_has_the_mode_a_plain_write_would_give_it() {
    for umask in [0o022, 0o077, 0o002, 0o027] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let world = ["run", "--scenario", "mid-call-takeover", "--seed", "1", "--defect", "non-atomic-fence"];
        let out = under_umask(
            p,
            umask,
            &[&world[..], &["--keep-db", "kept.db", "--html", "t.html", "--bundle", "b"]].concat(),
        );
        assert_exit(&out, 1);
        let out = under_umask(
            p,
            umask,
            &[
                "shrink",
                "--scenario",
                "mid-call-takeover",
                "--seed",
                "1",
                "--defect",
                "non-atomic-fence",
                "--out",
                "min.toml",
            ],
        );
        assert_exit(&out, 0);
        let out = under_umask(p, umask, &["sweep", "--scenario", "boot-storm", "--seeds", "2", "--report", "rep"]);
        assert!(out.status.code().is_some_and(|c| c == 0 || c == 3), "{}", stderr(&out));
        let out = under_umask(p, umask, &["promote", "--plan", "min.toml", "--story", "a mode test", "--dir", "kept"]);
        assert_exit(&out, 0);

        let (file, script, folder) = (mode(&p.join("plain")), mode(&p.join("plain.sh")), mode(&p.join("plain.d")));
        // The shell's references are what the umask says a plain write gives.
        assert_eq!((file, script, folder), (0o666 & !umask, 0o777 & !umask, 0o777 & !umask), "umask {umask:03o}");
        let bundle = p.join("b/mid-call-takeover-1");
        let mut files = vec![p.join("kept.db"), p.join("t.html"), p.join("min.toml")];
        for name in ["trace.txt", "report.json", "plan.toml", "store.db", "timeline.html"] {
            files.push(bundle.join(name));
        }
        for entry in std::fs::read_dir(p.join("rep")).unwrap().chain(std::fs::read_dir(p.join("kept")).unwrap()) {
            files.push(entry.unwrap().path());
        }
        assert!(files.len() >= 10, "{files:?}");
        for path in &files {
            assert_eq!(mode(path), file, "umask {umask:03o}: {} is {:o}", path.display(), mode(path));
        }
        assert_eq!(mode(&bundle.join("repro.sh")), script, "umask {umask:03o}: repro.sh");
        for folder_path in [p.join("b"), bundle, p.join("rep")] {
            assert_eq!(mode(&folder_path), folder, "umask {umask:03o}: {}", folder_path.display());
        }
    }
}
