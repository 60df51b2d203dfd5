//! Failure bundles: everything needed to understand a failing world, in one folder
//! `DIR/<scenario>-<seed>/`: `repro.sh` (runs the world again from the bundle's plan and exits
//! with its status), `trace.txt` (the `--trace` text), `report.json` (the versioned report),
//! `plan.toml` (the world's plan, with its defects and the checker it fails), `store.db` (the
//! final store, as `--keep-db` writes it) and `timeline.html` (the picture); with `run --shrink`,
//! also `plan.min.toml` (the shrunk plan).
//!
//! A bundle is built in a temporary folder beside its final place and renamed into place once
//! complete; its name is claimed first (creating the empty folder fails when it exists), so an
//! existing bundle is never overwritten and a reader never sees half a bundle. The world is run
//! again to write it (worlds are deterministic), and the rerun must match the fingerprint the
//! caller saw.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::report;
use fencesim_sim::catalogue::Defect;
use fencesim_sim::scenario::planfile::PlanFile;
use fencesim_sim::stores::DbKind;
use fencesim_sim::world::{self, WorldConfig, WorldReport};

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("bundle {0}: it exists; refusing to overwrite it (move it away or choose another --bundle folder)")]
    Exists(String),
    #[error("bundle {path}: {message}")]
    Io { path: String, message: String },
    #[error("bundle {path}: the world ran differently the second time (fingerprint {first:016x}, then {second:016x})")]
    Nondeterministic { path: String, first: u64, second: u64 },
    #[error(transparent)]
    World(#[from] world::WorldError),
}

/// Quote a word for a POSIX shell (single quotes; a single quote inside becomes `'\''`).
pub fn sh_quote(word: &str) -> String {
    crate::report::sh_quote(word)
}

/// The folder name of a world's bundle.
pub fn name(report: &WorldReport) -> String {
    format!("{}-{}", file_name_part(&report.scenario), report.seed)
}

/// Text made safe as part of one file name: anything but ASCII letters, digits, `-` and `_`
/// (a path separator, a dot of `..`, a control character) becomes `_`.
pub fn file_name_part(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

fn repro_sh(cfg: &WorldConfig, report: &WorldReport, defects: &[Defect]) -> String {
    let db = match &cfg.adapter {
        Some(adapter) => format!(" --store {}", report::sh_quote(&adapter.to_string())),
        None if cfg.db == DbKind::Memdb => String::new(),
        None => format!(" --db {}", cfg.db.as_str()),
    };
    // Already shell-quoted; a comment line ends at the first line break, and a quoted word holds none
    // the scenario check lets through, but a break is written out all the same.
    let original = report::repro(report, defects).replace(['\n', '\r'], " ");
    format!(
        "#!/bin/sh\n\
         # Runs this bundle's failing world again from its plan (defects included) and exits with\n\
         # its status: 1 while the violation is there, 0 once it is gone, 2 on a harness error.\n\
         # Set FENCESIM to the binary if `fencesim` is not on PATH; extra arguments are passed on\n\
         # (--format json, --html FILE ...). The world was first printed by:\n\
         #   {}\n\
         here=$(dirname -- \"$0\")\n\
         exec \"${{FENCESIM:-fencesim}}\" run --plan \"$here/plan.toml\"{db} --trace \"$@\"\n",
        original
    )
}

/// Whether `root` can hold bundles: a folder that takes new files, or nothing yet (it is created
/// with its parents, so its nearest existing ancestor must take them). Checked before any world
/// runs, so a `--bundle` naming a file, a dangling link or a read-only folder costs nothing.
pub fn check_root(root: &Path) -> Result<(), BundleError> {
    fencesim_sim::files::check_future_folder(root).map_err(|e| BundleError::Io {
        path: e.path,
        message: format!("{}; bundles are written into a folder", e.message),
    })
}

/// Write the bundle of a failing world under `root`; returns its folder. `seen` is the
/// fingerprint of the run the caller judged, which the rerun must reproduce.
pub fn write(root: &Path, cfg: &WorldConfig, defects: &[Defect], seen: u64) -> Result<PathBuf, BundleError> {
    write_with(root, cfg, defects, seen, None)
}

/// [`write`], plus `plan.min.toml` when a shrunk plan is given (`run --bundle DIR --shrink`).
pub fn write_with(
    root: &Path,
    cfg: &WorldConfig,
    defects: &[Defect],
    seen: u64,
    minimal: Option<&PlanFile>,
) -> Result<PathBuf, BundleError> {
    let io =
        |path: &Path, e: std::io::Error| BundleError::Io { path: path.display().to_string(), message: e.to_string() };
    std::fs::create_dir_all(root).map_err(|e| io(root, e))?;
    let staging = tempfile::Builder::new().prefix(".bundle-").tempdir_in(root).map_err(|e| io(root, e))?;
    let db_path = staging.path().join("store.db");
    let report = world::run(&WorldConfig {
        // A store adapter's data is its own: its bundle has no store.db.
        keep_db: cfg.adapter.is_none().then_some(fencesim_sim::files::Output { path: db_path, overwrite: false }),
        ..cfg.clone()
    })?;
    let target = root.join(name(&report));
    if report.fingerprint != seen {
        return Err(BundleError::Nondeterministic {
            path: target.display().to_string(),
            first: seen,
            second: report.fingerprint,
        });
    }
    let mut plan = PlanFile::draw(&cfg.scenario, cfg.seed, defects);
    plan.expect = report.violations.first().map(|v| v.checker.name().to_owned());
    let json = serde_json::to_string_pretty(&report::world_json(&report, defects)).unwrap_or_default() + "\n";
    let mut files: Vec<(&str, String)> = vec![
        ("repro.sh", repro_sh(cfg, &report, defects)),
        ("trace.txt", report::text(&report, defects, true)),
        ("report.json", json),
        ("plan.toml", plan.to_toml()),
        ("timeline.html", crate::timeline::html(&report, defects)),
    ];
    if let Some(minimal) = minimal {
        files.push(("plan.min.toml", minimal.to_toml()));
    }
    for (file, text) in files {
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = staging.path().join(file);
        // The modes a plain write gives under the user's umask: `0666 & !umask`, and for the
        // script, executable, `0777 & !umask` (the kernel applies the umask at creation).
        let mode = if file == "repro.sh" { 0o777 } else { fencesim_sim::files::OUTPUT_MODE };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).map_err(|e| io(&path, e))?;
    }
    // Claim the name (fails if a bundle is there), then replace the empty claim with the whole.
    match std::fs::create_dir(&target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(BundleError::Exists(target.display().to_string()));
        }
        Err(e) => return Err(io(&target, e)),
    }
    let staged = staging.keep();
    if let Err(e) = std::fs::rename(&staged, &target) {
        let _ = std::fs::remove_dir(&target);
        let _ = std::fs::remove_dir_all(&staged);
        return Err(io(&target, e));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(sh_quote("mid-call-takeover"), "mid-call-takeover");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("$(rm -rf /)"), "'$(rm -rf /)'");
    }
}
