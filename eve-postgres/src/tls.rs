//! TLS for the Postgres store's connections (feature `postgres-tls`): rustls with the ring
//! provider, trusting the Mozilla roots (webpki-roots) and, if given, the certificates in
//! [`PostgresOptions::ca_certificate`](super::PostgresOptions::ca_certificate) (a managed
//! database's own CA). The URL's `sslmode` decides whether TLS is tried (`prefer`, the default),
//! insisted on (`require`) or not used (`disable`).

use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PostgresOptions;
use super::connect::ConnectError;

/// The TLS connector for every pooled connection.
pub(super) fn connector(options: &PostgresOptions, target: &str) -> Result<MakeRustlsConnect, ConnectError> {
    let refuse = |reason: String| ConnectError::Tls { target: target.to_owned(), reason };
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(path) = &options.ca_certificate {
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|certificates| certificates.collect::<Result<_, _>>())
            .map_err(|error| {
                refuse(format!(
                    "cannot read the CA certificates in {} (PostgresOptions::ca_certificate): {error}",
                    path.display()
                ))
            })?;
        if certificates.is_empty() {
            return Err(refuse(format!(
                "{} holds no PEM certificate (PostgresOptions::ca_certificate)",
                path.display()
            )));
        }
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|error| refuse(format!("a certificate in {} is not usable: {error}", path.display())))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| refuse(format!("cannot configure rustls: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}
