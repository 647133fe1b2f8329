//! TLS between members (mutual): each member serves its Raft listener with
//! its certificate (`--tls-cert`/`--tls-key`, the API's) and accepts only
//! peers that present a certificate signed by the group's CA
//! (`--peer-ca`); as a client it presents the same certificate and trusts
//! only that CA, checking the peer's name (an IP or DNS SAN matching the
//! `--raft-peers` host). The cookie is still required on every request:
//! a certificate says a machine is one of the group's, the cookie that it
//! runs this group.

use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
use weir_actors::cluster::node::{certs, crypto};

/// The files of a member's identity and of the group's CA.
#[derive(Debug, Clone)]
pub struct PeerTlsFiles {
    /// The member's certificate chain (PEM).
    pub cert: std::path::PathBuf,
    /// The member's private key (PEM).
    pub key: std::path::PathBuf,
    /// The CA (PEM) that signed every member's certificate.
    pub ca: std::path::PathBuf,
}

/// What the transport needs: the listener's acceptor, the client's config.
#[derive(Clone)]
pub struct PeerTls {
    /// Accepts a peer whose certificate the CA signed.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// Presents this member's certificate; trusts the CA alone.
    pub client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls(..)")
    }
}

impl PeerTls {
    /// Loads the files and builds both sides.
    pub fn load(files: &PeerTlsFiles) -> Result<PeerTls, String> {
        let chain = certs(&files.cert).map_err(|e| format!("--tls-cert: {e}"))?;
        let key = PrivateKeyDer::from_pem_file(&files.key)
            .map_err(|e| format!("--tls-key {}: {e}", files.key.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in certs(&files.ca).map_err(|e| format!("--peer-ca: {e}"))? {
            roots
                .add(c)
                .map_err(|e| format!("--peer-ca {}: {e}", files.ca.display()))?;
        }
        let roots = Arc::new(roots);
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), crypto())
                .build()
                .map_err(|e| format!("--peer-ca {}: {e}", files.ca.display()))?;
        let server = rustls::ServerConfig::builder_with_provider(crypto())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?;
        let client = rustls::ClientConfig::builder_with_provider(crypto())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("--tls-cert/--tls-key as a client: {e}"))?;
        Ok(PeerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            client: Arc::new(client),
        })
    }
}
