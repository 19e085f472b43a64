//! Standard output of the command-line verbs, written without `print!`, which panics when
//! the reader has gone away (`conclave status | head -1`, `conclave defaults | true`).
//!
//! [`out!`] and [`outln!`] write to standard output. When the reader closed the pipe, the rest
//! of the output is dropped quietly and the command goes on to its normal end (the demo still
//! stops its nodes and removes its files); any other write error (a full disk behind a
//! redirection) is said once on standard error, and [`exit_code`] turns the command's exit
//! code into 74 (sysexits' EX_IOERR), since what it printed is incomplete. [`err!`] and
//! [`errln!`] write to standard error the same way (`conclave check-config bad.toml 2>&1 |
//! head -1`); an error that cannot be written there has nowhere else to go, and is dropped.

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};

/// sysexits' EX_IOERR: standard output could not be written.
pub(crate) const EXIT_IO: u8 = 74;

/// Whether standard output still takes text.
static STATE: AtomicU8 = AtomicU8::new(OPEN);
/// Writing works.
const OPEN: u8 = 0;
/// The reader went away: nothing more is written, and that is no failure.
const READER_GONE: u8 = 1;
/// Writing failed otherwise: nothing more is written, and the command fails.
const FAILED: u8 = 2;

/// Writes `args` to standard output, unless it was found closed or broken before.
pub(crate) fn write(args: fmt::Arguments<'_>) {
    if STATE.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut stdout = io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| stdout.flush());
    if let Err(err) = written {
        if err.kind() == io::ErrorKind::BrokenPipe {
            STATE.store(READER_GONE, Ordering::Relaxed);
        } else {
            STATE.store(FAILED, Ordering::Relaxed);
            write_error(format_args!(
                "error: cannot write to standard output: {err}\n"
            ));
        }
    }
}

/// Writes `args` to standard error; a failure has nowhere to be reported, and is dropped.
pub(crate) fn write_error(args: fmt::Arguments<'_>) {
    let mut stderr = io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.flush());
}

/// `code`, or [`EXIT_IO`] when standard output failed other than by its reader going away.
pub(crate) fn exit_code(code: ExitCode) -> ExitCode {
    if STATE.load(Ordering::Relaxed) == FAILED {
        ExitCode::from(EXIT_IO)
    } else {
        code
    }
}

/// `print!` that neither panics nor fails the command when the reader went away.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}
pub(crate) use out;

/// `println!` that neither panics nor fails the command when the reader went away.
macro_rules! outln {
    () => {
        $crate::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// `eprint!` that does not panic when standard error is a closed pipe.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::output::write_error(format_args!($($arg)*))
    };
}
pub(crate) use err;

/// `eprintln!` that does not panic when standard error is a closed pipe.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_error(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use errln;
