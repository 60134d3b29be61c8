//! TLS to a PostgreSQL store, as `sslmode` asks (rustls, with ring): `disable` never;
//! `prefer` (the default) and `require` encrypt without checking the server's certificate;
//! `verify-ca` checks that the root certificates (`sslrootcert`, else
//! `~/.postgresql/root.crt`, as libpq) sign it; `verify-full` also that it names the host.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::conn::DbError;
use crate::config::{PgUrl, TlsMode};

/// Why a connection to a PostgreSQL store could not be made as its URL asks (shown as
/// `PostgreSQL: …`, through [`DbError::Tls`]).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("TLS: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
    #[error(
        "sslmode={mode} needs root certificates: {} {why}; fix: add `sslrootcert=PATH` (a PEM file of the CA) to the \
         store's URL",
        path.display()
    )]
    RootCerts { mode: &'static str, path: std::path::PathBuf, why: RootCertsProblem },
    /// A connection refused, said with the URL as shown (never its password) and the fix.
    #[error("connecting to {shown}: {}; fix: {fix}", cause.to_string().trim_start_matches("PostgreSQL: "))]
    Connect { shown: String, cause: Box<DbError>, fix: &'static str },
}

/// What is wrong with the root certificates' file.
#[derive(Debug, thiserror::Error)]
pub enum RootCertsProblem {
    #[error("cannot be read ({0})")]
    Unreadable(rustls::pki_types::pem::Error),
    #[error("is not PEM ({0})")]
    NotPem(rustls::pki_types::pem::Error),
    #[error("holds a certificate rustls refuses ({0})")]
    Refused(rustls::Error),
    #[error("holds no certificate")]
    Empty,
}

/// A new connection to `url`'s server, encrypted as its `sslmode` says.
pub(super) fn connect(url: &PgUrl) -> Result<postgres::Client, DbError> {
    let config = postgres::Config::from(url.config.clone());
    Ok(match tls_config(url)? {
        None => config.connect(postgres::NoTls)?,
        Some(tls) => config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))?,
    })
}

/// [`connect`] for the async client, on the runtime this is awaited in (its connection
/// task is spawned there and ends with the client).
pub(crate) async fn connect_async(url: &PgUrl) -> Result<tokio_postgres::Client, DbError> {
    Ok(connect_watched(url).await?.0)
}

/// [`connect_async`], and the connection's task: it ends when the session does, whether
/// the client was dropped or the session was lost.
pub(super) async fn connect_watched(
    url: &PgUrl,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), DbError> {
    connected(url).await.map_err(|e| connect_error(url, e))
}

async fn connected(url: &PgUrl) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), DbError> {
    Ok(match tls_config(url)? {
        None => {
            let (client, connection) = url.config.connect(tokio_postgres::NoTls).await?;
            (client, tokio::spawn(async move { drop(connection.await) }))
        }
        Some(tls) => {
            let (client, connection) = url.config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls)).await?;
            (client, tokio::spawn(async move { drop(connection.await) }))
        }
    })
}

/// Runs `work` to its end on a current-thread tokio runtime of its own: the async client on
/// a thread that a blocking caller waits on (a lock's session, a snapshot's reader).
pub(crate) fn on_own_runtime<F: std::future::Future>(work: F) -> std::io::Result<F::Output> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(work))
}

/// A connection refused, said with the URL as shown (never its password) and the fix.
pub(super) fn connect_error(url: &PgUrl, e: DbError) -> DbError {
    let text = e.to_string();
    let fix = if text.contains("TLS") || text.contains("certificate") {
        "check the server's TLS and the URL's sslmode and sslrootcert"
    } else if url.has_password() || std::env::var_os("PGPASSWORD").is_some() {
        "check the server, the user and its password"
    } else {
        "check the server; a password goes in the URL or PGPASSWORD"
    };
    DbError::from(TlsError::Connect { shown: url.shown().to_string(), cause: Box::new(e), fix })
}

pub(super) fn tls_config(url: &PgUrl) -> Result<Option<ClientConfig>, DbError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::from)?;
    let config = match url.tls {
        TlsMode::Disable => return Ok(None),
        TlsMode::Prefer | TlsMode::Require => {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(Unchecked(provider))).with_no_client_auth()
        }
        TlsMode::VerifyFull => builder.with_root_certificates(root_certs(url)?).with_no_client_auth(),
        TlsMode::VerifyCa => {
            let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(root_certs(url)?), provider)
                .build()
                .map_err(TlsError::from)?;
            builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(chain))).with_no_client_auth()
        }
    };
    Ok(Some(config))
}

/// The root certificates of `sslrootcert`, else of libpq's default file.
fn root_certs(url: &PgUrl) -> Result<RootCertStore, DbError> {
    let path = match &url.root_cert {
        Some(p) => p.clone(),
        None => std::env::var_os("HOME")
            .map(|h| std::path::PathBuf::from(h).join(".postgresql/root.crt"))
            .unwrap_or_default(),
    };
    let mode = if url.tls == TlsMode::VerifyCa { "verify-ca" } else { "verify-full" };
    let fail = |why| DbError::from(TlsError::RootCerts { mode, path: path.clone(), why });
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&path).map_err(|e| fail(RootCertsProblem::Unreadable(e)))?;
    for cert in certs {
        let cert = cert.map_err(|e| fail(RootCertsProblem::NotPem(e)))?;
        roots.add(cert).map_err(|e| fail(RootCertsProblem::Refused(e)))?;
    }
    if roots.is_empty() {
        return Err(fail(RootCertsProblem::Empty));
    }
    Ok(roots)
}

/// `prefer` and `require`: any certificate, as libpq without root certificates; the
/// handshake's signatures are still checked.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain to a root certificate, whatever name the certificate gives.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::PgOwner;
    use crate::config::PgUrl;

    /// Whether a connection made as `query` says is encrypted (as the server sees it).
    fn encrypted(query: &str) -> Result<bool, String> {
        let admin = std::env::var("LAB_TEST_POSTGRES").unwrap();
        let url = PgUrl::parse(&format!("{admin}?{query}")).map_err(|e| e.to_string())?;
        let owner = PgOwner::connect(&url).map_err(|e| e.to_string())?;
        owner
            .call(|c| c.query_opt("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]))
            .map_err(|e| e.to_string())?
            .map(|r| r.get::<bool>(0).unwrap())
            .ok_or_else(|| "no row".to_string())
    }

    /// The test server (tests/pg-cluster.sh) has TLS on, with a certificate its CA signed
    /// for the name `localhost` only.
    #[test_needs::needs(postgres)]
    #[test]
    fn each_sslmode_encrypts_and_checks_the_server_as_libpq_does() {
        let ca = std::env::var("LAB_TEST_POSTGRES_CA").expect("tests/pg-cluster.sh sets it when openssl is there");
        let other = std::env::var("LAB_TEST_POSTGRES_OTHER_CA").unwrap();
        assert_eq!(encrypted("sslmode=disable"), Ok(false));
        assert_eq!(encrypted("sslmode=prefer"), Ok(true));
        assert_eq!(encrypted("sslmode=require"), Ok(true));
        assert_eq!(encrypted(&format!("sslmode=verify-ca&sslrootcert={ca}")), Ok(true));
        // By address: the certificate names `localhost`, not 127.0.0.1.
        let e = encrypted(&format!("sslmode=verify-full&sslrootcert={ca}")).unwrap_err();
        assert!(e.contains("certificate") && e.contains("not valid for name"), "{e}");
        let e = encrypted(&format!("sslmode=verify-ca&sslrootcert={other}")).unwrap_err();
        assert!(e.contains("UnknownIssuer"), "{e}");
        let e = encrypted("sslmode=verify-full&sslrootcert=/nonexistent/ca.pem").unwrap_err();
        assert!(e.contains("sslmode=verify-full needs root certificates: /nonexistent/ca.pem cannot be read"), "{e}");
        assert!(!e.contains(&std::env::var("LAB_TEST_POSTGRES").unwrap()), "the URL with its password: {e}");
        assert!(
            PgUrl::parse("postgres://lab@h/db?sslmode=sometimes")
                .unwrap_err()
                .to_string()
                .contains("sslmode `sometimes`")
        );
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn verify_full_connects_to_the_name_its_certificate_gives() {
        let ca = std::env::var("LAB_TEST_POSTGRES_CA").expect("tests/pg-cluster.sh sets it when openssl is there");
        let admin = std::env::var("LAB_TEST_POSTGRES").unwrap().replace("@127.0.0.1:", "@localhost:");
        let url = PgUrl::parse(&format!("{admin}?sslmode=verify-full&sslrootcert={ca}")).unwrap();
        let owner = PgOwner::connect(&url).unwrap();
        let ssl = owner.call(|c| c.query_opt("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])).unwrap();
        assert!(ssl.unwrap().get::<bool>(0).unwrap(), "encrypted");
    }
}
