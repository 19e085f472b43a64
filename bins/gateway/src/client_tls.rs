//! The CLI's side of TLS (issue 26 item 1, ADMIN-TLS): `https://` admin URLs, checked against
//! the CA the operator names (`--cacert`), with a client certificate for a node that asks for
//! one (`--cert` and `--key`, for `admin.tls.client_ca_file`). rustls on *ring*, as the node.
//!
//! No CA is trusted by default: a cluster's admin API is served with the operator's own CA,
//! never a public one, so an `https://` URL without `--cacert` is refused with what to do
//! rather than checked against a bundle of public roots.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig, TlsProvider};

/// `--cacert`, `--cert` and `--key`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct TlsArgs {
    /// CA certificate(s) (PEM) the node's certificate must chain to; needed for https://
    /// admin URLs (the node's admin.tls).
    #[arg(
        id = "tls_cacert",
        long = "cacert",
        global = true,
        env = "CONCLAVE_CACERT",
        value_name = "FILE"
    )]
    pub(crate) cacert: Option<PathBuf>,
    /// Client certificate (PEM), for a node that asks for one (admin.tls.client_ca_file);
    /// with --key.
    #[arg(
        id = "tls_cert",
        long = "cert",
        global = true,
        env = "CONCLAVE_CERT",
        value_name = "FILE"
    )]
    pub(crate) cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); with --cert.
    // Its own id: `kv put` has a KEY argument of its own.
    #[arg(
        id = "tls_key",
        long = "key",
        global = true,
        env = "CONCLAVE_KEY",
        value_name = "FILE"
    )]
    pub(crate) key: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS the CLI's requests use: `None` when no option is given (plain `http://` only).
    ///
    /// # Errors
    ///
    /// What is wrong with the options or their files, naming them.
    pub(crate) fn config(&self) -> Result<Option<TlsConfig>, String> {
        if self.cacert.is_none() && self.cert.is_none() && self.key.is_none() {
            return Ok(None);
        }
        let mut builder = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
        if let Some(path) = &self.cacert {
            let roots = certificates(path, "--cacert")?;
            builder = builder.root_certs(RootCerts::Specific(Arc::new(roots)));
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert, "--cert")?;
                let key = private_key(key)?;
                builder = builder.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(
                    "--cert needs --key (CONCLAVE_KEY): the certificate's private key".to_owned(),
                );
            }
            (None, Some(_)) => {
                return Err("--key needs --cert (CONCLAVE_CERT): the client certificate".to_owned());
            }
        }
        Ok(Some(builder.build()))
    }
}

fn read(path: &Path, option: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|err| format!("{option} {}: {err}", path.display()))
}

/// The PEM certificates in `path`; at least one.
fn certificates(path: &Path, option: &str) -> Result<Vec<Certificate<'static>>, String> {
    let pem = read(path, option)?;
    let mut found = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(cert)) => found.push(cert.to_owned()),
            Ok(_) => {}
            Err(err) => return Err(format!("{option} {}: {err}", path.display())),
        }
    }
    if found.is_empty() {
        return Err(format!(
            "{option} {}: no certificate in it (PEM, -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(found)
}

/// The PEM private key in `path`.
fn private_key(path: &Path) -> Result<PrivateKey<'static>, String> {
    let pem = read(path, "--key")?;
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::PrivateKey(key)) => return Ok(key.to_owned()),
            Ok(_) => {}
            Err(err) => return Err(format!("--key {}: {err}", path.display())),
        }
    }
    Err(format!(
        "--key {}: no private key in it (PEM: PKCS#8, PKCS#1 or SEC1)",
        path.display()
    ))
}
