//! Writes `conclave.pc`, the pkg-config file of libconclave, next to the library in the
//! profile's output directory (`target/<profile>/`), so that a C program builds with
//! `cc app.c $(pkg-config --cflags --libs conclave)` against the library just built, and runs
//! without `LD_LIBRARY_PATH`: the file names the repository's `include/` and the library's
//! directory by absolute path, and links with an rpath to that directory.
//!
//! Whether the library is built to abort on a panic is not decided here: cargo gives build
//! scripts the target's default panic strategy, not the profile's, so `src/lib.rs` warns
//! instead, where the compiler knows.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let (Some(out_dir), Some(manifest_dir)) = (
        std::env::var_os("OUT_DIR"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) else {
        println!(
            "cargo::warning=conclave.pc not written: cargo set no OUT_DIR or CARGO_MANIFEST_DIR"
        );
        return;
    };
    // OUT_DIR is <profile dir>/build/conclave-ffi-<hash>/out, and the library is written
    // to <profile dir> (target/release-ffi, target/<triple>/debug, ...).
    let Some(profile_dir) = Path::new(&out_dir).ancestors().nth(3) else {
        println!(
            "cargo::warning=conclave.pc not written: OUT_DIR {} is not inside a profile directory",
            Path::new(&out_dir).display()
        );
        return;
    };
    let include_dir = Path::new(&manifest_dir).join("../../include");
    let (profile_dir, include_dir) = (absolute(profile_dir), absolute(&include_dir));
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let pc = pkg_config(&profile_dir, &include_dir, &target_os, &version);
    let path = profile_dir.join("conclave.pc");
    // A failure here must not fail the library's build: the library is fine without it.
    if let Err(err) = std::fs::write(&path, pc) {
        println!(
            "cargo::warning=conclave.pc not written to {}: {err}",
            path.display()
        );
    }
}

/// `path` made absolute and without `..`, or as it is if it cannot be resolved.
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The text of `conclave.pc`.
fn pkg_config(lib_dir: &Path, include_dir: &Path, target_os: &str, version: &str) -> String {
    // `pkg-config --static` adds these: the system libraries the Rust standard library of the
    // static archive calls (`cargo rustc -p conclave-ffi --crate-type staticlib -- --print
    // native-static-libs` lists them). Only known for Linux.
    let private = if target_os == "linux" {
        "Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc\n"
    } else {
        ""
    };
    format!(
        "# Written by crates/ffi/build.rs for the libconclave built in this directory.\n\
         libdir={lib}\n\
         includedir={include}\n\
         \n\
         Name: conclave\n\
         Description: a leader-election node inside a program (the C ABI of conclave)\n\
         Version: {version}\n\
         Cflags: -I${{includedir}}\n\
         Libs: -L${{libdir}} -Wl,-rpath,${{libdir}} -lconclave\n\
         {private}",
        lib = escape(lib_dir),
        include = escape(include_dir),
    )
}

/// A path as a pkg-config value: pkg-config splits `Cflags` and `Libs` as a shell does, and
/// expands `${...}`, so blanks, quotes and backslashes are escaped and `$` is doubled.
fn escape(path: &Path) -> String {
    let mut escaped = String::new();
    for c in path.display().to_string().chars() {
        match c {
            '$' => escaped.push_str("$$"),
            c if c.is_whitespace() || "\\\"'#".contains(c) => {
                escaped.push('\\');
                escaped.push(c);
            }
            c => escaped.push(c),
        }
    }
    escaped
}
