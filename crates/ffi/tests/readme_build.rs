//! The README's C build lines, run as a user runs them: the shell block of its "Use it as a
//! library" section is read from README.md (so the README and this test cannot drift apart),
//! and every line but the `cargo build` one runs verbatim with `sh`, in a directory laid out
//! like the repository: `target/<the README's profile>` there is a link to the library this
//! test was built with (a release build does not fit in the test suite's time; the library
//! and its `conclave.pc` are the same build script's, for any profile), `include` a link to
//! the repository's. The lines build `app.c` and run the program, which must work with no
//! `LD_LIBRARY_PATH` (cargo sets one for its tests; it is removed here): the rpath that
//! `conclave.pc` gives must find the library.
//!
//! Needs `cc` and `pkg-config`; installs Debian's `pkg-config` when it runs as root and
//! `pkg-config` is missing, and is skipped with a message where neither can be had.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;

use support::{have, include_dir, install_with_apt, library_dir, run_client};
use tempfile::TempDir;

/// The `app.c` the README's lines compile: a configuration that is not TOML must come back
/// as `CONCLAVE_ERR_CONFIG` with a message, which takes the library loaded and its code run.
const APP_C: &str = r#"#include <stdio.h>
#include <conclave.h>

int main(void) {
    ConclaveHandle node = 0;
    char why[512];
    int32_t code = ConclaveStart("[node", &node);
    ConclaveLastError(why, sizeof why);
    printf("ConclaveStart: %d (%s)\n", (int)code, why);
    if (code != CONCLAVE_ERR_CONFIG || why[0] == '\0') {
        return 1;
    }
    puts("ok");
    return 0;
}
"#;

/// The lines of the shell block in README.md's "Use it as a library" section.
fn readme_build_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(support::crate_dir().join("../../README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|section| section.starts_with("Use it as a library\n"))
        .expect("README.md has no section \"## Use it as a library\"");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section \"Use it as a library\" of README.md has no ```sh block");
    block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The profile directory a `cargo build` line writes to (`release-ffi` for `--profile
/// release-ffi`).
fn profile_of(cargo_line: &str) -> String {
    let words: Vec<&str> = cargo_line.split_whitespace().collect();
    if let Some(at) = words.iter().position(|word| *word == "--profile") {
        return words
            .get(at + 1)
            .expect("--profile without a name")
            .to_string();
    }
    if words.contains(&"--release") {
        "release".to_owned()
    } else {
        "debug".to_owned()
    }
}

/// Links `link` to `original`, creating `link`'s directory.
fn symlink(original: &Path, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(original, link).unwrap();
}

/// The README's build lines build a C program that runs without `LD_LIBRARY_PATH`.
#[test]
fn readme_c_build_lines_build_a_program_that_runs() {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) to run the README's build lines with");
        return;
    }
    if !install_with_apt(&["pkg-config"], &["pkg-config"]) {
        eprintln!(
            "skipped: pkg-config is not installed and could not be (install Debian's \
             pkg-config as root to run this test)"
        );
        return;
    }
    let lines = readme_build_lines();
    let (cargo, rest): (Vec<String>, Vec<String>) = lines
        .into_iter()
        .partition(|line| line.starts_with("cargo "));
    let [cargo] = cargo.as_slice() else {
        panic!("the README's build lines must hold one cargo line, not {cargo:?}");
    };
    assert!(
        cargo.contains("-p conclave-ffi"),
        "the README's cargo line does not build conclave-ffi: {cargo}"
    );
    let profile = profile_of(cargo);
    assert!(
        rest.iter()
            .any(|line| line.contains(&format!("target/{profile}"))),
        "the README builds into target/{profile} but no other line of it uses that directory: \
         {rest:#?}"
    );

    let dir = TempDir::new().unwrap();
    symlink(&library_dir(), &dir.path().join("target").join(&profile));
    symlink(&include_dir(), &dir.path().join("include"));
    std::fs::write(dir.path().join("app.c"), APP_C).unwrap();
    let script = rest.join("\n");
    let out = run_client(
        "README's C build lines",
        Command::new("sh")
            .arg("-ec")
            .arg(&script)
            .current_dir(dir.path())
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("PKG_CONFIG_PATH"),
    );
    println!("{script}\n{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}
