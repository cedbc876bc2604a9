//! TLS for the tests: a throw-away PKI made with `rcgen` at test time
//! ([`TestPki`]), and TLS-only `redis-server` processes
//! ([`RedisServer::start_tls`]).
//!
//! Every certificate and key is a PEM file in the PKI's own temporary
//! folder, removed when the [`TestPki`] is dropped. Server certificates
//! name `localhost` and `127.0.0.1` (but for [`ServerCert::WrongName`]), so
//! that `rediss://127.0.0.1:port` and `rediss://localhost:port` both pass
//! the name check.

use core::sync::atomic::{AtomicUsize, Ordering};
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::RedisServer;

/// The names every good server certificate is valid for.
const SERVER_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// The only name in [`ServerCert::WrongName`].
pub const WRONG_NAME: &str = "wrong.example";

/// Which certificate a TLS server presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerCert {
    /// Signed by the PKI's CA ([`TestPki::ca`]), for `localhost` and
    /// `127.0.0.1`, valid now.
    #[default]
    Good,
    /// Signed by the CA, valid now, but for [`WRONG_NAME`] only.
    WrongName,
    /// Signed by the CA, for the good names, but expired (valid in 2000
    /// only).
    Expired,
    /// For the good names and valid now, but signed by the other CA
    /// ([`TestPki::other_ca`]).
    OtherCa,
}

impl ServerCert {
    /// The file name of the certificate, without extension.
    fn stem(self) -> &'static str {
        match self {
            ServerCert::Good => "server",
            ServerCert::WrongName => "wrong-name",
            ServerCert::Expired => "expired",
            ServerCert::OtherCa => "other-ca-server",
        }
    }
}

/// A certificate chain and its private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// The certificate (`*.pem`).
    pub cert: PathBuf,
    /// Its private key (`*.key`, PKCS#8).
    pub key: PathBuf,
}

/// A CA, a second unrelated CA, and certificates signed by them, written
/// to a fresh temporary folder that is removed when this is dropped.
///
/// Files: `ca.pem`, `other-ca.pem`; server certificates `server`,
/// `wrong-name`, `expired`, `other-ca-server`; client certificates
/// `client` (by the CA) and `other-ca-client` (by the other CA); each as
/// `NAME.pem` and `NAME.key`.
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
}

impl TestPki {
    /// Makes the keys and certificates (ECDSA P-256) and writes them.
    pub fn new() -> io::Result<TestPki> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "redlock-pki-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        // A folder left by an earlier process with the same pid.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        // Owned from here: removed on drop, also if writing fails.
        let pki = TestPki { dir };
        pki.write_all()?;
        Ok(pki)
    }

    fn write_all(&self) -> io::Result<()> {
        let ca = self.write_ca("ca", "redlock test CA")?;
        let other = self.write_ca("other-ca", "redlock other test CA")?;
        // Valid now (the validity years), and expired long ago.
        let now = (1975, 4096);
        let server = ExtendedKeyUsagePurpose::ServerAuth;
        let client = ExtendedKeyUsagePurpose::ClientAuth;
        self.write_leaf(
            &ca,
            ServerCert::Good.stem(),
            &SERVER_NAMES,
            server.clone(),
            now,
        )?;
        self.write_leaf(
            &ca,
            ServerCert::WrongName.stem(),
            &[WRONG_NAME],
            server.clone(),
            now,
        )?;
        let year_2000 = (2000, 2001);
        self.write_leaf(
            &ca,
            ServerCert::Expired.stem(),
            &SERVER_NAMES,
            server.clone(),
            year_2000,
        )?;
        self.write_leaf(
            &other,
            ServerCert::OtherCa.stem(),
            &SERVER_NAMES,
            server,
            now,
        )?;
        self.write_leaf(&ca, "client", &["redlock-client"], client.clone(), now)?;
        self.write_leaf(&other, "other-ca-client", &["redlock-client"], client, now)?;
        Ok(())
    }

    /// A self-signed CA, written as `stem.pem`; its key stays in memory.
    fn write_ca(&self, stem: &str, name: &str) -> io::Result<Issuer<'static, KeyPair>> {
        let mut params = CertificateParams::new(Vec::new()).map_err(io::Error::other)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        let key = KeyPair::generate().map_err(io::Error::other)?;
        let cert = params.self_signed(&key).map_err(io::Error::other)?;
        std::fs::write(self.dir.join(format!("{stem}.pem")), cert.pem())?;
        Ok(Issuer::new(params, key))
    }

    /// A certificate for `names` signed by `issuer`, valid from January 1st
    /// of the first year to January 1st of the second, written as
    /// `stem.pem` and `stem.key`.
    fn write_leaf(
        &self,
        issuer: &Issuer<'static, KeyPair>,
        stem: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        (from, to): (i32, i32),
    ) -> io::Result<()> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).map_err(io::Error::other)?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, first);
        }
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(to, 1, 1);
        let key = KeyPair::generate().map_err(io::Error::other)?;
        let cert = params.signed_by(&key, issuer).map_err(io::Error::other)?;
        std::fs::write(self.dir.join(format!("{stem}.pem")), cert.pem())?;
        std::fs::write(self.dir.join(format!("{stem}.key")), key.serialize_pem())?;
        Ok(())
    }

    /// The folder that holds the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA's certificate (`ca.pem`): what clients and servers trust.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The other CA's certificate (`other-ca.pem`), which signed
    /// [`ServerCert::OtherCa`] and [`TestPki::other_ca_client`].
    pub fn other_ca(&self) -> PathBuf {
        self.dir.join("other-ca.pem")
    }

    /// A server certificate and its key.
    pub fn server(&self, which: ServerCert) -> CertFiles {
        self.files(which.stem())
    }

    /// A client certificate signed by the CA (servers that check clients
    /// accept it).
    pub fn client(&self) -> CertFiles {
        self.files("client")
    }

    /// A client certificate signed by the other CA (servers that check
    /// clients refuse it).
    pub fn other_ca_client(&self) -> CertFiles {
        self.files("other-ca-client")
    }

    fn files(&self, stem: &str) -> CertFiles {
        CertFiles {
            cert: self.dir.join(format!("{stem}.pem")),
            key: self.dir.join(format!("{stem}.key")),
        }
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a TLS-only server is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TlsOptions {
    /// The certificate it presents.
    pub cert: ServerCert,
    /// `--tls-auth-clients yes`: clients must present a certificate signed
    /// by the PKI's CA (default: no).
    pub auth_clients: bool,
}

impl TlsOptions {
    /// The server's TLS arguments (the ports excepted).
    fn args(self, pki: &TestPki) -> Vec<String> {
        let files = pki.server(self.cert);
        let path = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--tls-cert-file".into(),
            path(&files.cert),
            "--tls-key-file".into(),
            path(&files.key),
            "--tls-ca-cert-file".into(),
            path(&pki.ca()),
            "--tls-auth-clients".into(),
            if self.auth_clients { "yes" } else { "no" }.into(),
        ]
    }
}

impl RedisServer {
    /// Starts a TLS-only server (`--port 0 --tls-port P`) without
    /// persistence, with the certificate and client checks of `options`.
    /// [`addr`](RedisServer::addr) and [`port`](RedisServer::port) are its
    /// TLS port's; it can be killed and restarted as a plain one. Keep `pki`
    /// alive while the server may restart (it reads the files again).
    pub fn start_tls(pki: &TestPki, options: TlsOptions) -> io::Result<RedisServer> {
        RedisServer::start_tls_with(pki, options, &[])
    }

    /// [`start_tls`](RedisServer::start_tls) with extra command-line
    /// arguments.
    pub fn start_tls_with(
        pki: &TestPki,
        options: TlsOptions,
        extra: &[&str],
    ) -> io::Result<RedisServer> {
        let mut args = options.args(pki);
        args.extend(extra.iter().map(|s| (*s).to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        RedisServer::start_mode(crate::ServerKind::Redis, &args, true)
    }
}
