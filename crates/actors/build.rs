//! Records the commit the crate is built from, for `conclave_build_info{commit}` (CB-4):
//! `CONCLAVE_BUILD_COMMIT` from the environment when set (packagers building from a source
//! archive know it), else `git rev-parse` of the checkout, else `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CONCLAVE_BUILD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = std::env::var("CONCLAVE_BUILD_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=CONCLAVE_BUILD_COMMIT={}", commit.trim());
}

/// `git` run in this crate's directory, its output when it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let output = Command::new("git")
        .args(args)
        .current_dir(&dir)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// A path `git rev-parse --git-path` names, made absolute.
fn git_path(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(git(&["rev-parse", "--git-path", name])?);
    if path.is_absolute() {
        return Some(path);
    }
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    Some(Path::new(&dir).join(path))
}

/// The checkout's commit, watching the files that change with it (HEAD, the branch it points
/// to, packed refs), so a new commit rebuilds the crate and nothing else does.
fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec![git_path("HEAD")?, git_path("packed-refs")?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git_path(&branch));
    }
    for path in watched.iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(commit)
}
