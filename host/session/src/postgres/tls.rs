//! TLS for the PostgreSQL store: [`longhand_pgtls`], shared with the
//! databases granted to tools, and its tests against a real server.

pub use longhand_pgtls::*;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_either_url_form() {
        let (rest, s) = split_url(
            "postgres://u:p@db:5432/x?application_name=a&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u:p@db:5432/x?application_name=a");
        assert_eq!(s.mode, SslMode::VerifyFull);
        assert_eq!(s.root, Some(RootCert::File("/etc/ca.pem".into())));
        let (rest, s) =
            split_url("host=db user=u sslmode=require sslrootcert='/a b/ca.pem' dbname=x").unwrap();
        assert_eq!(rest, "host=db user=u dbname=x");
        assert_eq!(s.mode, SslMode::Require);
        assert_eq!(s.root, Some(RootCert::File("/a b/ca.pem".into())));
        // Absent: plain TCP, as before.
        let (rest, s) = split_url("postgres://u@db/x").unwrap();
        assert_eq!(
            (rest.as_str(), s.mode),
            ("postgres://u@db/x", SslMode::Disable)
        );
        let (_, s) = split_url("postgres://u@db/x?sslrootcert=system&sslmode=verify-ca").unwrap();
        assert_eq!(s.root, Some(RootCert::System));
    }

    #[test]
    fn bad_tls_settings_are_refused_with_what_to_do() {
        let err = split_url("postgres://u@db/x?sslmode=maybe").unwrap_err();
        assert!(err.to_string().contains("not one of disable"), "{err}");
        let err = split_url("postgres://u@db/x?sslmode=verify-full").unwrap_err();
        assert!(err.to_string().contains("needs sslrootcert="), "{err}");
        let mut config = tokio_postgres::Config::new();
        let settings = TlsSettings {
            mode: SslMode::VerifyFull,
            root: Some(RootCert::File("/nonexistent/ca.pem".into())),
        };
        let err = connector(&mut config, &settings).err().unwrap().to_string();
        assert!(
            err.contains("/nonexistent/ca.pem") && err.contains("cannot be read"),
            "{err}"
        );
        let dir = tempfile::TempDir::new().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let settings = TlsSettings {
            mode: SslMode::VerifyCa,
            root: Some(RootCert::File(empty)),
        };
        let err = connector(&mut config, &settings).err().unwrap().to_string();
        assert!(err.contains("holds no certificate"), "{err}");
    }

    /// A CA that signed nothing the test server has (made once with
    /// openssl; only its certificate is kept).
    const WRONG_CA: &str = r#"-----BEGIN CERTIFICATE-----
MIIBjDCCATKgAwIBAgIUNsrSX72ddSmEhtKP/VgYaK3tc1swCgYIKoZIzj0EAwIw
IzEhMB8GA1UEAwwYTm90IHRoZSBMb25naGFuZCB0ZXN0IENBMCAXDTI2MTIwMTIy
NTE0MFoYDzIxMjYxMTA3MjI1MTQwWjAjMSEwHwYDVQQDDBhOb3QgdGhlIExvbmdo
YW5kIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAR0ZXM7+96xWkYD
4cZ9vTp5vSWqW4WBJ3dmoUNGdSqn44lKkF86dSJFWF1e+kZmBDXu32gCOec/Vcbn
TH+YveIQo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwIBBjAdBgNV
HQ4EFgQUk03XcFvCFg02jtrWk1vQ2q3fXqcwCgYIKoZIzj0EAwIDSAAwRQIhANQg
9vtHJ0GtD5gdTRIUHMUCs6XW+fBm11dn5AF8aX1pAiAHpT58KY4L1dwVrRpk9HJ3
F19fInPwyHTgJD+S5yD1mA==
-----END CERTIFICATE-----
"#;

    /// `LONGHAND_TEST_PG` and `LONGHAND_TEST_PG_TLS_CA` (what
    /// `.ci/setup-postgres.sh` prints), or `None` after saying the test is
    /// skipped — a failure instead under `LONGHAND_REQUIRE_EXTERNAL=1`.
    fn tls_server() -> Option<(String, PathBuf)> {
        let url = crate::conformance::postgres_url()?;
        match std::env::var("LONGHAND_TEST_PG_TLS_CA") {
            Ok(ca) if !ca.is_empty() => Some((url, PathBuf::from(ca))),
            _ if std::env::var("LONGHAND_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1") => panic!(
                "LONGHAND_REQUIRE_EXTERNAL=1 but LONGHAND_TEST_PG_TLS_CA is not set: run \
                 `eval \"$(.ci/setup-postgres.sh)\"` first"
            ),
            _ => {
                eprintln!(
                    "skipped: PostgreSQL TLS test (set LONGHAND_TEST_PG_TLS_CA to the CA of the \
                     server in LONGHAND_TEST_PG, e.g. `eval \"$(.ci/setup-postgres.sh)\"`)"
                );
                None
            }
        }
    }

    /// The server as a key=value string naming host `host` but connecting
    /// to the address in `url`, with a schema of its own (created, and
    /// dropped by the returned guard's caller).
    async fn words(url: &str, host: &str, extra: &str) -> (String, String) {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let addr = match &config.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            other => panic!("a TCP server is needed for TLS, not {other:?}"),
        };
        let schema = format!(
            "lh_tls_{}",
            crate::store::SessionId::generate(0).as_str()[2..].to_lowercase()
        );
        let (admin, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .unwrap();
        let password =
            String::from_utf8_lossy(config.get_password().unwrap_or_default()).into_owned();
        let text = format!(
            "host={host} hostaddr={addr} port={} user={} password='{password}' dbname={} \
             options='-c search_path={schema}' {extra}",
            config.get_ports().first().copied().unwrap_or(5432),
            config.get_user().unwrap_or_default(),
            config.get_dbname().unwrap_or_default(),
        );
        (text, schema)
    }

    async fn drop_schema(url: &str, schema: &str) {
        let (admin, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
    }

    /// Whether the store's connections are encrypted, as the server sees.
    async fn encrypted(store: &super::super::PostgresStore) -> bool {
        let mut pooled = store.conn().await.unwrap();
        pooled
            .conn()
            .unwrap()
            .client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    #[tokio::test]
    async fn verify_full_connects_with_the_servers_ca_and_refuses_any_other() {
        use super::super::PostgresStore;
        use crate::store::Store;
        let Some((url, ca)) = tls_server() else {
            return;
        };
        let ca = ca.display().to_string();
        // The right CA and the certificate's name: encrypted, and the
        // store works over it.
        let (text, schema) = words(
            &url,
            "localhost",
            &format!("sslmode=verify-full sslrootcert={ca}"),
        )
        .await;
        let store = PostgresStore::connect(&text).await.unwrap();
        assert!(encrypted(&store).await, "not encrypted");
        assert!(store.list().await.unwrap().is_empty());
        // A name the certificate does not carry: refused by verify-full,
        // accepted by verify-ca (chain only).
        let wrong_name = text.replace("host=localhost", "host=db.invalid");
        let err = PostgresStore::connect(&wrong_name)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("does not verify against the CA in {ca}")),
            "{err}"
        );
        assert!(err.contains("db.invalid"), "{err}");
        let chain_only = wrong_name.replace("sslmode=verify-full", "sslmode=verify-ca");
        let store = PostgresStore::connect(&chain_only).await.unwrap();
        assert!(encrypted(&store).await);
        // Another CA: refused, naming the file and the failure.
        let dir = tempfile::TempDir::new().unwrap();
        let wrong = dir.path().join("wrong-ca.pem");
        std::fs::write(&wrong, WRONG_CA).unwrap();
        let other_ca = text.replace(&ca, &wrong.display().to_string());
        let err = PostgresStore::connect(&other_ca)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "does not verify against the CA in {}",
                wrong.display()
            )),
            "{err}"
        );
        assert!(
            err.contains("UnknownIssuer") || err.contains("unknown issuer"),
            "{err}"
        );
        let public = text.replace(&format!("sslrootcert={ca}"), "sslrootcert=system");
        let err = PostgresStore::connect(&public)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("the public CAs"), "{err}");
        // require without a CA: encrypted, not authenticated (libpq's
        // meaning); without sslmode: plain, as before.
        let encrypt_only = text.replace(
            &format!("sslmode=verify-full sslrootcert={ca}"),
            "sslmode=require",
        );
        let store = PostgresStore::connect(&encrypt_only).await.unwrap();
        assert!(encrypted(&store).await);
        let plain = text.replace(&format!("sslmode=verify-full sslrootcert={ca}"), "");
        let store = PostgresStore::connect(&plain).await.unwrap();
        assert!(!encrypted(&store).await);
        drop_schema(&url, &schema).await;
    }

    /// What a PostgreSQL server without TLS answers an SSLRequest with:
    /// `N`. Under a mode that requires TLS the store refuses to go on in
    /// plain text.
    #[tokio::test]
    async fn a_server_without_tls_is_refused_when_the_url_requires_it() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 8];
                    if socket.read_exact(&mut request).await.is_ok()
                        && request == [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]
                    {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let _ = socket.write_all(b"N").await;
                    }
                    let mut rest = Vec::new();
                    let _ = socket.read_to_end(&mut rest).await;
                });
            }
        });
        let dir = tempfile::TempDir::new().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, WRONG_CA).unwrap();
        for query in [
            "sslmode=require".to_owned(),
            format!("sslmode=verify-full&sslrootcert={}", ca.display()),
        ] {
            let url = format!("postgres://u:p@127.0.0.1:{port}/db?{query}");
            let err = super::super::PostgresStore::connect(&url)
                .await
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("the server does not accept TLS, and the store URL requires it"),
                "{err}"
            );
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
