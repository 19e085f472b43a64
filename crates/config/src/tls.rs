//! TLS for the admin and metrics listeners (issue 26 item 1, ADMIN-TLS): the files an operator
//! names in `[admin.tls]` and `[metrics.tls]`, read and checked the same way by
//! `conclave check-config`, at start and on every SIGHUP reload, so that a certificate that
//! would fail a client is refused where the operator looks, naming the file and the reason.
//!
//! The checks: each file is readable and holds what it should (PEM certificates, one private
//! key); the key is the certificate's; the certificate is valid now (its notBefore passed, its
//! notAfter not); the client CA file, when given, holds at least one certificate. Expiry is
//! read from the certificate's own validity field with a small DER walk, so no X.509 parser is
//! needed beyond what rustls already carries.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::ring::sign::any_supported_type;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The files of one TLS listener, as validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `cert_file`: the listener's certificate chain (PEM), its own certificate first.
    pub cert_file: PathBuf,
    /// `key_file`: its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// `client_ca_file`: the CA certificates (PEM) a client's certificate must chain to;
    /// `None` asks clients for no certificate.
    pub client_ca_file: Option<PathBuf>,
}

/// What [`TlsFiles`] hold, read and checked.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// The certificate chain with its signing key, the key checked to be the certificate's.
    pub certified: Arc<CertifiedKey>,
    /// The client CA certificates, when mutual TLS is asked for.
    pub client_roots: Option<Vec<CertificateDer<'static>>>,
    /// The certificate's notAfter, Unix seconds.
    pub not_after_unix: i64,
}

/// Why a listener's TLS files cannot be used; the message names the file and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProblem {
    /// The key the problem is about: `cert_file`, `key_file` or `client_ca_file`.
    pub field: &'static str,
    /// What is wrong, and with which file.
    pub message: String,
}

impl fmt::Display for TlsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for TlsProblem {}

fn problem(field: &'static str, message: String) -> TlsProblem {
    TlsProblem { field, message }
}

impl TlsIdentity {
    /// Reads and checks `files` at `now_unix` (seconds).
    ///
    /// # Errors
    ///
    /// The first [`TlsProblem`] found.
    pub fn load(files: &TlsFiles, now_unix: i64) -> Result<Self, TlsProblem> {
        let chain = certificates("cert_file", &files.cert_file)?;
        let key = PrivateKeyDer::from_pem_file(&files.key_file).map_err(|err| {
            problem(
                "key_file",
                format!(
                    "{} holds no private key in PEM (PKCS#8, PKCS#1 or SEC1): {err}",
                    files.key_file.display()
                ),
            )
        })?;
        let signing = any_supported_type(&key).map_err(|err| {
            problem(
                "key_file",
                format!(
                    "{}: the key cannot sign (RSA, ECDSA P-256/P-384 or Ed25519 are taken): {err}",
                    files.key_file.display()
                ),
            )
        })?;
        let certified = CertifiedKey::new(chain.clone(), signing);
        match certified.keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(err) => {
                return Err(problem(
                    "key_file",
                    format!(
                        "{} is not the key of the certificate in {}: {err}",
                        files.key_file.display(),
                        files.cert_file.display()
                    ),
                ));
            }
        }
        let (not_before, not_after) = validity(&chain[0]).ok_or_else(|| {
            problem(
                "cert_file",
                format!(
                    "{}: the first certificate's validity cannot be read",
                    files.cert_file.display()
                ),
            )
        })?;
        if now_unix < not_before {
            return Err(problem(
                "cert_file",
                format!(
                    "{}: the certificate is not valid before {} (this machine's clock says {})",
                    files.cert_file.display(),
                    utc(not_before),
                    utc(now_unix)
                ),
            ));
        }
        if now_unix > not_after {
            return Err(problem(
                "cert_file",
                format!(
                    "{}: the certificate expired at {}; make a new one",
                    files.cert_file.display(),
                    utc(not_after)
                ),
            ));
        }
        let client_roots = files
            .client_ca_file
            .as_deref()
            .map(|path| certificates("client_ca_file", path))
            .transpose()?;
        Ok(Self {
            certified: Arc::new(certified),
            client_roots,
            not_after_unix: not_after,
        })
    }
}

/// The PEM certificates in `path`; at least one.
fn certificates(
    field: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsProblem> {
    let read = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|err| problem(field, format!("{} cannot be read: {err}", path.display())))?;
    if read.is_empty() {
        return Err(problem(
            field,
            format!(
                "{} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)",
                path.display()
            ),
        ));
    }
    Ok(read)
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One DER element at the start of `der`: its tag, its contents and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// `(notBefore, notAfter)` of a certificate, Unix seconds.
fn validity(certificate: &CertificateDer<'_>) -> Option<(i64, i64)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, certificate, _) = element(certificate.as_ref())? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(certificate)? else {
        return None;
    };
    // version [0] EXPLICIT (optional), serialNumber, signature, issuer, then validity.
    let mut rest = tbs;
    let (tag, _, after) = element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..3 {
        rest = element(rest)?.2;
    }
    let (SEQUENCE, validity, _) = element(rest)? else {
        return None;
    };
    let (before_tag, before, rest) = element(validity)?;
    let (after_tag, after, _) = element(rest)?;
    Some((time(before_tag, before)?, time(after_tag, after)?))
}

/// A UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`), Unix seconds.
fn time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        // RFC 5280: two-digit years 50-99 are 19xx, 00-49 are 20xx.
        0x17 if text.len() == 12 => {
            let yy: i64 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        0x18 if text.len() == 14 => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let field = |at: usize| rest.get(at..at + 2)?.parse::<i64>().ok();
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_both_encodings_and_dates_round_trip() {
        assert_eq!(time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(time(0x18, b"20261128190000Z"), Some(1_795_892_400));
        assert_eq!(time(0x18, b"2026112819000Z"), None);
        assert_eq!(time(0x17, b"700101000000"), None);
        assert_eq!(utc(1_795_892_400), "2026-11-28 19:00:00 UTC");
        for days in [-1000, 0, 59, 60, 365, 10_957, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn a_truncated_or_foreign_der_reads_as_nothing() {
        assert_eq!(validity(&CertificateDer::from(vec![])), None);
        assert_eq!(
            validity(&CertificateDer::from(vec![0x30, 0x82, 0xff])),
            None
        );
        assert_eq!(validity(&CertificateDer::from(vec![0x04, 0x00])), None);
    }
}
