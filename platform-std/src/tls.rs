//! TLS settings (feature `tls`): the client's rustls configuration, made
//! once by [`Builder::build`](crate::Builder::build) from the builder's
//! options, and the name each `rediss://` server's certificate must carry.
//!
//! The crypto provider is *ring* (it builds with a C compiler alone, where
//! aws-lc-rs needs CMake or a prebuilt library on some targets), and the
//! trusted roots are Mozilla's, compiled in (`webpki-roots`): the same on
//! every machine, with nothing read from the system at run time, so a
//! minimal container without a CA bundle still verifies managed services.
//! A private CA (self-hosted servers) is given with
//! [`Builder::tls_ca_file`](crate::Builder::tls_ca_file), which then
//! replaces the built-in roots.

use alloc::sync::Arc;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::transport::TlsTarget;
use crate::url::ServerUrl;
use crate::{Builder, Error};

/// The builder's TLS options (feature `tls`).
impl Builder {
    /// TLS: trust only the CA certificates of this PEM file for
    /// `rediss://` servers, instead of the built-in roots (Mozilla's, from
    /// `webpki-roots`). Read by [`build`](Builder::build).
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.ca_file = Some(path.into());
        self
    }

    /// TLS: present this client certificate (a PEM chain, the client's
    /// own first) with its private key (PEM: PKCS#8, PKCS#1 or SEC1) to
    /// servers that ask for one (mutual TLS, `tls-auth-clients yes`). Read
    /// by [`build`](Builder::build); the key is never printed.
    pub fn tls_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client_cert = Some((cert.into(), key.into()));
        self
    }

    /// TLS: check every `rediss://` server's certificate against this name
    /// (and send it as SNI) instead of the URL's host: for servers reached
    /// by an IP address whose certificates name a host. One name for all
    /// the TLS servers (a certificate they share, or one with every
    /// server's name); servers with certificates of their own are best
    /// given by the names those certificates carry.
    pub fn tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls.server_name = Some(name.into());
        self
    }

    /// Each server with its TLS target (`rediss://` ones), the rustls
    /// configuration made once for all of them.
    pub(crate) fn tls_targets(
        &self,
        urls: &[ServerUrl],
    ) -> Result<Vec<(ServerUrl, Option<TlsTarget>)>, Error> {
        let config = match urls.iter().any(|u| u.tls) {
            true => Some(self.tls.client_config().map_err(Error::TlsSettings)?),
            false => {
                if self.tls.is_set() {
                    log::warn!(
                        "redlock: TLS settings given, but no server is rediss://: \
                         they are not used"
                    );
                }
                None
            }
        };
        urls.iter()
            .map(|u| {
                let target = match &config {
                    Some(c) if u.tls => Some(self.tls.target(c, u).map_err(Error::TlsSettings)?),
                    _ => None,
                };
                Ok((u.clone(), target))
            })
            .collect()
    }
}

/// The builder's TLS options.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsOptions {
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
    pub(crate) server_name: Option<String>,
}

impl TlsOptions {
    /// Some option was given.
    pub(crate) fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.client_cert.is_some() || self.server_name.is_some()
    }

    /// The rustls configuration these options describe. `Err` says which
    /// file is wrong and how, never what a key file holds.
    pub(crate) fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca_file {
            Some(path) => {
                for cert in certificates(path)? {
                    roots.add(cert).map_err(|e| {
                        format!("{}: a CA certificate is not usable: {e}", path.display())
                    })?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up: {e}"))?
            .with_root_certificates(roots);
        let config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certificates(cert)?;
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    format!(
                        "{}: no usable private key ({})",
                        key.display(),
                        pem_error(&e)
                    )
                })?;
                builder
                    .with_client_auth_cert(chain, key_der)
                    .map_err(|e| match e {
                        rustls::Error::InconsistentKeys(_) => format!(
                            "the client certificate {} and the key {} do not go together",
                            cert.display(),
                            key.display()
                        ),
                        e => format!(
                            "the client certificate {} with the key {}: {e}",
                            cert.display(),
                            key.display()
                        ),
                    })?
            }
        };
        Ok(Arc::new(config))
    }

    /// What a `rediss://` server's certificate is checked against: the
    /// explicit server name, or else the URL's host (a name, or an IP
    /// address matched against the certificate's IP addresses).
    pub(crate) fn target(
        &self,
        config: &Arc<rustls::ClientConfig>,
        url: &ServerUrl,
    ) -> Result<TlsTarget, String> {
        let name = self.server_name.as_deref().unwrap_or(&url.host);
        let name = ServerName::try_from(name.to_string()).map_err(|_| {
            format!("{name:?} is neither a host name nor an IP address a certificate can name")
        })?;
        Ok(TlsTarget {
            config: config.clone(),
            name,
        })
    }
}

/// Every certificate of a PEM file (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {}", path.display(), pem_error(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {}", path.display(), pem_error(&e)))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// A PEM error in words (never the file's content).
fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::Io(io) => format!("cannot read it: {io}"),
        E::NoItemsFound => "no PEM item of the expected kind in it".into(),
        _ => "not valid PEM".into(),
    }
}
