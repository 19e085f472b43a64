//! `docs/benchmarks.md` must show what `election_bench` prints at the commit that carries it
//! (issue 8): every block marked `<!-- election_bench output: ARGS -->` is compared, byte for
//! byte, with the program's standard output for those arguments. The simulator is
//! deterministic, so the output depends on the code and the arguments only, never on the
//! machine or the thread count.
//!
//! The short configuration (`--trials 10`) runs in `cargo test`; the full tables (1,000 trials
//! per range) take a few seconds in a release build and run only with
//! `CONCLAVE_FULL_FIGURES=1` (`bench/figure16.sh --check` does that). When a change to the
//! election moves a figure, `bench/figure16.sh` rewrites the blocks; then update the prose
//! that quotes them.

#[allow(
    dead_code,
    reason = "the example's main and helpers are not all used here"
)]
#[path = "../examples/election_bench.rs"]
mod election_bench;

use std::path::Path;

const MARKER: &str = "<!-- election_bench output:";

/// Each marked block: its arguments and its text.
fn marked_blocks(doc: &str) -> Vec<(Vec<String>, String)> {
    let mut blocks = Vec::new();
    let mut rest = doc;
    while let Some(at) = rest.find(MARKER) {
        let after = &rest[at + MARKER.len()..];
        let (args, after) = after.split_once("-->").expect("a marker ends with -->");
        let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
        let after = after
            .trim_start_matches([' ', '\n'])
            .strip_prefix("```text\n")
            .expect("a marker is followed by a ```text block");
        let (text, after) = after.split_once("```").expect("the block is closed");
        blocks.push((args, text.to_owned()));
        rest = after;
    }
    blocks
}

fn check(full: bool) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md");
    let doc = std::fs::read_to_string(&path).expect("docs/benchmarks.md");
    let blocks = marked_blocks(&doc);
    assert!(
        blocks.iter().any(|(args, _)| args.is_empty()) && blocks.len() >= 2,
        "docs/benchmarks.md lost its election_bench blocks"
    );
    for (args, documented) in blocks {
        let is_full = !args.iter().any(|arg| arg == "--trials" || arg == "--quick");
        if is_full != full {
            continue;
        }
        let options = election_bench::parse_options(args.clone()).expect("valid arguments");
        let (printed, safe) = election_bench::report(&options);
        assert!(safe, "a safety invariant broke:\n{printed}");
        if printed != documented {
            let first = printed
                .lines()
                .zip(documented.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(printed.lines().count().min(documented.lines().count()));
            panic!(
                "docs/benchmarks.md, block `election_bench {}`, differs from the program's \
                 output from line {} on (run bench/figure16.sh):\n--- documented\n{}\n--- printed\n{}",
                args.join(" "),
                first + 1,
                documented
                    .lines()
                    .skip(first)
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("\n"),
                printed
                    .lines()
                    .skip(first)
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
    }
}

/// The short block equals the program's output.
#[test]
fn documented_short_figure16_run_is_what_the_program_prints() {
    check(false);
}

/// The full tables equal the program's output (`CONCLAVE_FULL_FIGURES=1`).
#[test]
fn documented_full_figure16_tables_are_what_the_program_prints() {
    if std::env::var_os("CONCLAVE_FULL_FIGURES").is_none() {
        eprintln!("skipped: set CONCLAVE_FULL_FIGURES=1 to compare the full tables");
        return;
    }
    check(true);
}
