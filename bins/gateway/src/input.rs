//! Values given on the command line that may be too large, or too awkward, for an argument:
//! `kv put KEY VALUE` and `jobs add PAYLOAD`. As etcdctl and consul read theirs, `-` reads the
//! value from standard input and `@FILE` from a file; `@@…` stands for a value that itself
//! starts with `@` (one `@` dropped); anything else is the value as written.
//!
//! The bytes are kept exactly as read, a trailing newline included (`echo hi | conclave kv
//! put K -` stores `hi` and a newline; `printf hi` leaves it out), so that a file goes in and
//! comes out unchanged. Values are JSON strings, so what is read must be UTF-8 text.

use std::io::{self, Read};
use std::path::PathBuf;

/// Why a value could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// `@FILE` names a file that cannot be read.
    #[error("{arg} {given}: cannot read {}: {source}", path.display())]
    File {
        arg: &'static str,
        given: String,
        path: PathBuf,
        source: io::Error,
    },
    /// `-`, and standard input cannot be read.
    #[error("{arg} -: cannot read standard input: {source}")]
    Stdin {
        arg: &'static str,
        source: io::Error,
    },
    /// What was read is not text.
    #[error(
        "{arg} {given}: {what} is not UTF-8 text (byte {at} is not); a value is a JSON string, \
         so binary data must be encoded first (base64, for example)"
    )]
    NotText {
        arg: &'static str,
        given: String,
        what: String,
        at: usize,
    },
    /// `@` alone names no file.
    #[error(
        "{arg} @: no file named after the @ (give @FILE to read a file, or @@ for a value that \
         starts with @)"
    )]
    NoFileName { arg: &'static str },
}

impl InputError {
    /// 66 (sysexits' EX_NOINPUT) for an input file or standard input that cannot be read; 64
    /// (EX_USAGE) for the rest: the argument is wrong.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            InputError::File { .. } | InputError::Stdin { .. } => crate::EXIT_NOINPUT,
            InputError::NotText { .. } | InputError::NoFileName { .. } => crate::EXIT_USAGE,
        }
    }
}

/// The value argument `arg` (`VALUE`, `PAYLOAD`) given as `given`: read from standard input for
/// `-`, from FILE for `@FILE`, `@…` for `@@…`, else `given` itself.
pub(crate) fn value(arg: &'static str, given: &str) -> Result<String, InputError> {
    resolve(arg, given, io::stdin().lock())
}

/// [`value`], with `stdin` standing for standard input.
fn resolve(arg: &'static str, given: &str, mut stdin: impl Read) -> Result<String, InputError> {
    if given == "-" {
        let mut bytes = Vec::new();
        stdin
            .read_to_end(&mut bytes)
            .map_err(|source| InputError::Stdin { arg, source })?;
        return text(arg, given, "standard input", bytes);
    }
    let Some(rest) = given.strip_prefix('@') else {
        return Ok(given.to_owned());
    };
    if rest.starts_with('@') {
        return Ok(rest.to_owned());
    }
    if rest.is_empty() {
        return Err(InputError::NoFileName { arg });
    }
    let path = PathBuf::from(rest);
    let bytes = std::fs::read(&path).map_err(|source| InputError::File {
        arg,
        given: given.to_owned(),
        path: path.clone(),
        source,
    })?;
    text(arg, given, &format!("{}", path.display()), bytes)
}

fn text(arg: &'static str, given: &str, what: &str, bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|err| InputError::NotText {
        arg,
        given: given.to_owned(),
        what: what.to_owned(),
        at: err.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(given: &str, stdin: &[u8]) -> Result<String, InputError> {
        resolve("VALUE", given, stdin)
    }

    #[test]
    fn a_plain_argument_is_the_value() {
        assert_eq!(read("blue", b"unused").unwrap(), "blue");
        assert_eq!(read("", b"").unwrap(), "");
        assert_eq!(read("a-b", b"").unwrap(), "a-b");
        assert_eq!(read("x@y", b"").unwrap(), "x@y");
    }

    /// `-` reads all of standard input, its trailing newline kept.
    #[test]
    fn a_dash_reads_standard_input_as_it_is() {
        assert_eq!(
            read("-", b"line one\nline two\n").unwrap(),
            "line one\nline two\n"
        );
        assert_eq!(read("-", b"").unwrap(), "");
        let big = "x".repeat(1 << 20);
        assert_eq!(read("-", big.as_bytes()).unwrap(), big);
    }

    /// `@FILE` reads the file, bytes unchanged; `@@` escapes a value that starts with `@`.
    #[test]
    fn an_at_sign_reads_a_file_and_two_escape_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value.json");
        std::fs::write(&path, "{\"a\": 1}\n").unwrap();
        let given = format!("@{}", path.display());
        assert_eq!(read(&given, b"").unwrap(), "{\"a\": 1}\n");
        assert_eq!(read("@@home", b"").unwrap(), "@home");
        assert_eq!(read("@@@x", b"").unwrap(), "@@x");
    }

    /// A missing file is named with the argument and exits 66; `@` alone and bytes that are
    /// not text are usage errors (64), each saying what to do.
    #[test]
    fn unreadable_input_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = read(&format!("@{}", missing.display()), b"").unwrap_err();
        assert_eq!(err.exit_code(), crate::EXIT_NOINPUT);
        let said = err.to_string();
        assert!(said.starts_with("VALUE @"), "{said}");
        assert!(
            said.contains(&format!("cannot read {}", missing.display())),
            "{said}"
        );

        let err = read("@", b"").unwrap_err();
        assert_eq!(err.exit_code(), crate::EXIT_USAGE);
        assert!(err.to_string().contains("@@"), "{err}");

        let binary = dir.path().join("binary");
        std::fs::write(&binary, b"ok\xff\xfe").unwrap();
        let err = read(&format!("@{}", binary.display()), b"").unwrap_err();
        assert_eq!(err.exit_code(), crate::EXIT_USAGE);
        assert!(
            err.to_string().contains("is not UTF-8 text (byte 2"),
            "{err}"
        );
        let err = read("-", b"\xc3").unwrap_err();
        assert!(
            err.to_string().contains("standard input is not UTF-8"),
            "{err}"
        );
    }
}
