//! TLS of the admin and metrics listeners (issue 26 item 1, ADMIN-TLS): the rustls server
//! configuration built from the files `[admin.tls]` or `[metrics.tls]` name, and its reload.
//!
//! A listener's certificate, key and client CAs can be replaced while it runs: the server
//! configuration asks a [`ListenerTls`] for them at every handshake, and
//! [`ListenerTls::reload`] (SIGHUP) swaps in what the files hold now once they pass the same
//! checks as at start (`conclave_config::tls`). Files that fail them leave the listener as it
//! was, and the reason is returned for the log. Connections already open keep the identity
//! they were made with.
//!
//! With a client CA file, a client must present a certificate that chains to one of its CAs,
//! or the handshake fails: no request is read (mutual TLS). Whether client certificates are
//! asked for at all is fixed at start; a reload replaces the CAs.
//!
//! rustls runs on *ring* only, explicitly, so nothing depends on a process-wide default
//! provider.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use conclave_config::tls::{TlsFiles, TlsIdentity, TlsProblem};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};
use rustls_pki_types::{CertificateDer, UnixTime};

/// The crypto every listener and the CLI use: *ring*'s.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Seconds since the Unix epoch now, for the certificate checks.
fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

/// One listener's TLS: its files, and what they held when last read.
#[derive(Clone)]
pub struct ListenerTls {
    files: TlsFiles,
    certified: Arc<RwLock<Arc<CertifiedKey>>>,
    /// `None` without a client CA file.
    verifier: Option<Arc<RwLock<Arc<dyn ClientCertVerifier>>>>,
}

impl fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ListenerTls {
    /// Reads and checks `files`.
    ///
    /// # Errors
    ///
    /// What is wrong with them, naming the file.
    pub fn load(files: &TlsFiles) -> Result<Self, TlsProblem> {
        let identity = TlsIdentity::load(files, now_unix())?;
        let verifier = match &identity.client_roots {
            Some(roots) => Some(Arc::new(RwLock::new(client_verifier(files, roots)?))),
            None => None,
        };
        Ok(Self {
            files: files.clone(),
            certified: Arc::new(RwLock::new(identity.certified)),
            verifier,
        })
    }

    /// The files this listener reads.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again and, when they pass the checks, serves what they hold to every
    /// handshake from now on.
    ///
    /// # Errors
    ///
    /// What is wrong with them; the listener keeps what it had.
    pub fn reload(&self) -> Result<(), TlsProblem> {
        let identity = TlsIdentity::load(&self.files, now_unix())?;
        let verifier = match (&self.verifier, &identity.client_roots) {
            (Some(_), Some(roots)) => Some(client_verifier(&self.files, roots)?),
            _ => None,
        };
        *self
            .certified
            .write()
            .unwrap_or_else(PoisonError::into_inner) = identity.certified;
        if let (Some(slot), Some(verifier)) = (&self.verifier, verifier) {
            *slot.write().unwrap_or_else(PoisonError::into_inner) = verifier;
        }
        Ok(())
    }

    /// The rustls configuration of the listener: TLS 1.2 and 1.3, HTTP/1.1 only.
    pub fn server_config(&self) -> ServerConfig {
        let builder = ServerConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .expect("ring's provider supports the default protocol versions");
        let builder = match &self.verifier {
            Some(slot) => builder.with_client_cert_verifier(Arc::new(Reloadable(slot.clone()))),
            None => builder.with_no_client_auth(),
        };
        let mut config =
            builder.with_cert_resolver(Arc::new(CurrentIdentity(self.certified.clone())));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }
}

/// The verifier of client certificates chaining to `roots`.
fn client_verifier(
    files: &TlsFiles,
    roots: &[CertificateDer<'static>],
) -> Result<Arc<dyn ClientCertVerifier>, TlsProblem> {
    let path = files
        .client_ca_file
        .as_deref()
        .map_or_else(String::new, |path| path.display().to_string());
    let mut store = RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).map_err(|err| TlsProblem {
            field: "client_ca_file",
            message: format!("{path}: a certificate is not a usable CA: {err}"),
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(store), crypto_provider())
        .build()
        .map_err(|err| TlsProblem {
            field: "client_ca_file",
            message: format!("{path}: {err}"),
        })
}

/// Hands every handshake the identity the files held when last read.
#[derive(Debug)]
struct CurrentIdentity(Arc<RwLock<Arc<CertifiedKey>>>);

impl ResolvesServerCert for CurrentIdentity {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.0
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// A client-certificate verifier that can be replaced while the listener runs.
struct Reloadable(Arc<RwLock<Arc<dyn ClientCertVerifier>>>);

impl fmt::Debug for Reloadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reloadable")
    }
}

impl Reloadable {
    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ClientCertVerifier for Reloadable {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    // The CA names are a hint to clients with several certificates; a reloadable list cannot
    // be lent out from behind its lock, and conclave's clients hold one certificate.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}
