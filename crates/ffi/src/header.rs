//! `include/conclave.h`, written from the Rust definitions (EMB-2): the functions from the
//! `c_api!` block (names, parameters with their C types, doc lines), the codes from the
//! tables of [`crate::abi`], the peer record and the callback types from their declarations
//! there. A test keeps the committed header equal to [`render`]'s text; regenerate it with
//! `CONCLAVE_WRITE_HEADER=1 cargo test -p conclave-ffi header`.
//!
//! A generator of our own rather than cbindgen: the ABI is a dozen functions, and a table
//! with a type-to-C mapping checked by the compiler keeps the header exact without a
//! build-time dependency that is heavy to compile.

use std::ffi::{c_char, c_void};
use std::fmt::Write as _;

use crate::abi::{
    self, ConclaveHandle, ConclavePeer, Constant, LeaderChangedCallback, PeerStatusCallback,
};

/// A Rust type that crosses the boundary, and how C spells it.
pub(crate) trait CType {
    /// The C spelling, ready to be followed by a parameter name.
    const NAME: &'static str;
}

macro_rules! c_types {
    ($($rust:ty => $c:literal,)*) => {
        $(impl CType for $rust {
            const NAME: &'static str = $c;
        })*
    };
}

c_types! {
    bool => "bool ",
    i32 => "int32_t ",
    u64 => "uint64_t ",
    usize => "size_t ",
    *const c_char => "const char *",
    *mut c_char => "char *",
    *mut u64 => "uint64_t *",
    *mut usize => "size_t *",
    *mut c_void => "void *",
    ConclaveHandle => "ConclaveHandle ",
    *mut ConclaveHandle => "ConclaveHandle *",
    *mut ConclavePeer => "ConclavePeer *",
    LeaderChangedCallback => "ConclaveLeaderChangedCallback ",
    PeerStatusCallback => "ConclavePeerStatusCallback ",
}

/// One exported function, as the header declares it.
#[derive(Debug)]
pub(crate) struct Function {
    /// Its name.
    pub(crate) name: &'static str,
    /// Its doc lines, each with the leading space rustdoc keeps.
    pub(crate) doc: &'static [&'static str],
    /// Each parameter's C type and name.
    pub(crate) params: &'static [(&'static str, &'static str)],
}

const PREAMBLE: &str = "\
/*
 * conclave.h - the C ABI of conclave, a leader-election node inside a program.
 *
 * Written by crates/ffi/src/header.rs from the Rust definitions; do not edit by hand.
 * Regenerate: CONCLAVE_WRITE_HEADER=1 cargo test -p conclave-ffi header
 *
 * Build the library with cargo build --profile release-ffi -p conclave-ffi, which writes
 * target/release-ffi/libconclave.so, libconclave.a and conclave.pc; then, with
 * PKG_CONFIG_PATH=target/release-ffi, cc app.c $(pkg-config --cflags --libs conclave)
 * (pkg-config --static --libs for the static library's system libraries).
 * docs/embedding.md walks through a whole program in C, Python and C#.
 *
 * Rules
 *
 * - Status codes. Every function returns int32_t: CONCLAVE_OK (0) on success (IsLeader: 1
 *   or 0), a negative CONCLAVE_ERR_* code on failure. ConclaveLastError then gives the
 *   message of the last call that failed on the calling thread.
 * - Handles. ConclaveStart gives a handle; every other function takes it. A handle of 0, an
 *   unknown one, and one already passed to ConclaveStop are refused with
 *   CONCLAVE_ERR_INVALID_HANDLE; handles are never reused. Any thread may call any
 *   function, concurrently.
 * - Strings passed in are copied before the call returns and must be NUL-terminated UTF-8.
 *   Strings passed out are written into the caller's buffer, always NUL-terminated; a
 *   buffer too small gets what fits and CONCLAVE_ERR_BUFFER_TOO_SMALL.
 * - Callbacks. Each node has one callback thread, created by ConclaveStart, which calls the
 *   registered callbacks one at a time, in the order the node published the events. A
 *   callback reports the changes from its registration on: read the state as it is then
 *   with GetCurrentLeader, IsLeader and GetPeerList after registering. A
 *   callback may call any function of this header, on any node, its own included
 *   (ConclaveStop from a callback returns without waiting for the callback thread). A slow
 *   callback delays the next ones, never the node; if the callbacks fall more than 256
 *   events behind, the oldest are dropped and the current state is passed on instead: the
 *   leader-changed callback with the current leader and term, and the peer-status callback
 *   for every peer with old_status equal to new_status. Strings passed to a callback are
 *   valid until it returns. user_data is passed back untouched, on the callback thread.
 *   Callbacks must return normally (no longjmp, no exception through the library).
 * - Fencing. A leader may be deposed at any moment. (term, leader) from GetCurrentLeader
 *   or the leader-changed callback is the fencing token: whatever the leader drives should
 *   remember the highest term it has seen and refuse commands stamped with a lower one.
 * - No panic crosses the boundary: a defect inside the library is returned as
 *   CONCLAVE_ERR_INTERNAL with a message. That takes a library built to unwind, as the
 *   release-ffi profile and debug builds are; one built with cargo build --release aborts
 *   instead (its build warns so): a defect then ends the whole program at once.
 */

#ifndef CONCLAVE_H
#define CONCLAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern \"C\" {
#endif
";

const POSTAMBLE: &str = "
#ifdef __cplusplus
}
#endif

#endif /* CONCLAVE_H */
";

/// The header's text.
pub(crate) fn render() -> String {
    let mut out = String::from(PREAMBLE);
    constants(&mut out, "Status codes.", abi::STATUS_CODES);
    constants(
        &mut out,
        "Roles (the leader-changed callback's role).",
        abi::ROLES,
    );
    constants(
        &mut out,
        "Peer statuses (ConclavePeer.status and the peer-status callback).",
        abi::PEER_STATUSES,
    );
    let _ = write!(
        out,
        "
/* Bytes of ConclavePeer.id, and a size that always holds a peer id with its NUL. */
#define CONCLAVE_PEER_ID_SIZE {size}

/* A running node. 0 is never a handle. */
typedef uint64_t ConclaveHandle;

/* One peer of GetPeerList. */
typedef struct ConclavePeer {{
    /* The peer id, NUL-terminated. */
    char id[CONCLAVE_PEER_ID_SIZE];
    /* CONCLAVE_PEER_CONNECTED or CONCLAVE_PEER_DISCONNECTED. */
    int32_t status;
    /* The last round-trip time in microseconds; -1 until one was measured. */
    int64_t rtt_us;
}} ConclavePeer;

/* The leader this node knows changed: leader (\"\" when none), its term, this node's role. */
typedef void (*ConclaveLeaderChangedCallback)(const char *leader, uint64_t term, int32_t role,
                                              void *user_data);

/* A peer joined (old_status CONCLAVE_PEER_ABSENT), left (new_status CONCLAVE_PEER_ABSENT)
   or changed status. */
typedef void (*ConclavePeerStatusCallback)(const char *peer_id, int32_t old_status,
                                           int32_t new_status, void *user_data);
",
        size = abi::PEER_ID_SIZE
    );
    for function in crate::api::FUNCTIONS {
        out.push_str("\n/*\n");
        for line in function.doc {
            let line = line.strip_prefix(' ').unwrap_or(line);
            if line.is_empty() {
                out.push_str(" *\n");
            } else {
                let _ = writeln!(out, " * {line}");
            }
        }
        out.push_str(" */\n");
        let params: Vec<String> = function
            .params
            .iter()
            .map(|(ty, name)| format!("{ty}{name}"))
            .collect();
        let _ = writeln!(out, "int32_t {}({});", function.name, params.join(", "));
    }
    out.push_str(POSTAMBLE);
    out
}

fn constants(out: &mut String, title: &str, table: &[Constant]) {
    let _ = writeln!(out, "\n/* {title} */");
    for (name, value, doc) in table {
        let _ = writeln!(out, "/* {doc} */");
        let _ = writeln!(out, "#define {name} {value}");
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// EMB-2: include/conclave.h is what the definitions write, so the header C, Python and C#
    /// programs compile against cannot drift from the library.
    #[test]
    fn header_is_written_from_the_definitions() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/conclave.h");
        let written = render();
        if std::env::var_os("CONCLAVE_WRITE_HEADER").is_some() {
            std::fs::write(&path, &written).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == written,
            "include/conclave.h differs from the definitions in crates/ffi/src; regenerate it \
             with CONCLAVE_WRITE_HEADER=1 cargo test -p conclave-ffi header"
        );
    }

    /// EMB-2: the peer record's layout is the one the header spells out (no hidden padding
    /// for a C#, Python or C reader to guess).
    #[test]
    fn peer_record_layout_matches_the_header() {
        assert_eq!(offset_of!(ConclavePeer, id), 0);
        assert_eq!(offset_of!(ConclavePeer, status), abi::PEER_ID_SIZE);
        assert_eq!(offset_of!(ConclavePeer, rtt_us), abi::PEER_ID_SIZE + 4);
        assert_eq!(size_of::<ConclavePeer>(), abi::PEER_ID_SIZE + 4 + 8);
    }
}
