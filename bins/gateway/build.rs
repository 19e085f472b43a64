//! Link options of the `conclave` executable, all for the memory of an idle node
//! (docs/benchmarks.md, "Idle memory with the replicated log").
//!
//! Packed relative relocations (DT_RELR, `-z pack-relative-relocs`) would save another
//! 0.35 MB that the loader reads at every start, but need glibc 2.36 at run time: a node
//! built with them would not start on Ubuntu 22.04 or RHEL 9, so they are not used.
//!
//! Code layout: `idle-order.txt` lists the functions a node runs from its start to an idle
//! minute, and the linker puts them first, together: LLD, rustc's own linker on x86_64 Linux
//! since 1.90; with an older compiler, which links with the system's `ld`, the list is left
//! out.
//! The kernel maps code in 64 KiB blocks around each page a process touches; scattered among
//! the rest of the program, those functions (1.5 of 5.4 MB) made nearly all of its code
//! resident. A name the build does not define is skipped, so a stale list costs memory, never
//! correctness; `bench/idle_order.py` writes it anew. `CONCLAVE_LINK_MAP=FILE` writes the
//! linker's map, which that program reads.
//!
//! Segments aligned to 64 KiB (`max-page-size`): the kernel then loads the program at an
//! address where each 64 KiB block of memory holds one 64 KiB block of the file. With 4 KiB
//! alignment a block of memory straddled two blocks of the page cache, and a fault could map
//! both.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=idle-order.txt");
    println!("cargo::rerun-if-env-changed=CONCLAVE_LINK_MAP");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let abi = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || abi != "gnu" || arch != "x86_64" || !links_with_lld() {
        return;
    }
    println!("cargo::rustc-link-arg-bins=-Wl,-z,max-page-size=65536");
    let order =
        Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("idle-order.txt");
    if order.is_file() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
    if let Some(map) = env::var_os("CONCLAVE_LINK_MAP") {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,-Map={}",
            Path::new(&map).display()
        );
        // The map names symbols as the ordering file must: mangled.
        println!("cargo::rustc-link-arg-bins=-Wl,--no-demangle");
    }
}

/// Whether rustc links with its own LLD: by default on x86_64 Linux since 1.90.
fn links_with_lld() -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(output) = std::process::Command::new(rustc).arg("-V").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&output.stdout);
    let mut numbers = version
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
