//! TLS (`rediss://`) against real TLS-only `redis-server` processes, with
//! certificates made at test time ([`TestPki`]): the operations over TLS
//! (lock, extend, inspect, unlock, fenced locks; TLS 1.3 and 1.2), mixed
//! with plain servers, TLS and plain ports addressed the wrong way and
//! peers that are no TLS server, mutual TLS, each certificate failure and
//! what the report says of it, a server alert, and the builder's checks of
//! its certificate and key files. Stalled, slow, reset and restarted links,
//! and TLS errors after the handshake: `tls_faults.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test driver

mod tls_common;

use tls_common::*;

/// Servers that require a client certificate signed by the PKI's CA
/// (`--tls-auth-clients yes`).
const CHECK_CLIENTS: TlsOptions = TlsOptions {
    cert: ServerCert::Good,
    auth_clients: true,
};

/// Lock, inspect, extend, unlock with `client` on its `n` servers,
/// checking what the servers hold at each step: with the client's own
/// connections (which see its requests in order: all `n` hold the key), and
/// with `witness`, a second client over the same servers (a majority does,
/// and it cannot take the lock).
fn lock_extend_inspect_unlock(client: &Client, witness: &Client, n: usize) {
    let majority = n / 2 + 1;
    let holders = |inspection: &redlock_std::Inspection, token: &str| {
        inspection
            .entries()
            .iter()
            .filter(|h| h.outcome == ServerOutcome::Ok && h.holder_str() == Some(token))
            .count()
    };

    let mut lock = client.lock(b"tls-res", TTL).expect("lock over TLS");
    assert!(lock.report().count(ServerOutcome::Ok) >= majority);
    assert!(lock.remaining() > Duration::ZERO);
    let own = client.inspect(b"tls-res").expect("inspect over TLS");
    assert_eq!(own.entries().len(), n);
    assert_eq!(holders(&own, lock.token()), n, "{own:?}");
    for h in own.entries() {
        let ttl = h.ttl().expect("the key expires");
        assert!(ttl > Duration::ZERO && ttl <= TTL, "{h:?}");
    }
    let seen = witness.inspect(b"tls-res").expect("inspect over TLS");
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    assert!(holders(&seen, lock.token()) >= majority, "{seen:?}");

    // Another client cannot take it.
    let err = witness.lock(b"tls-res", TTL).unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");

    let longer = Duration::from_secs(120);
    client.extend(&mut lock, longer).expect("extend over TLS");
    assert_eq!(lock.extensions(), 1);
    assert!(lock.remaining() > TTL);
    let own = client.inspect(b"tls-res").expect("inspect over TLS");
    let extended = own
        .entries()
        .iter()
        .filter(|h| h.holder_str() == Some(lock.token()) && h.ttl().is_some_and(|t| t > TTL))
        .count();
    assert_eq!(extended, n, "{own:?}");

    let released = client.unlock(&lock).expect("unlock over TLS");
    assert_eq!(released.deleted(), n);
    let own = client.inspect(b"tls-res").expect("inspect over TLS");
    assert!(own.entries().iter().all(|h| h.holder.is_none()), "{own:?}");
    // Free again for anyone.
    let other = witness.lock(b"tls-res", TTL).expect("the released lock");
    witness.unlock(&other).expect("unlock over TLS");
}

/// Two clients over `urls` that trust the PKI's CA: the one that locks
/// and the witness of [`lock_extend_inspect_unlock`].
fn client_and_witness(pki: &TestPki, urls: &[String]) -> (Client, Client) {
    let client = trusting(pki, urls).build().unwrap();
    let witness = trusting(pki, urls).build().unwrap();
    (client, witness)
}

/// A client over `urls` that trusts the PKI's CA and presents the client
/// certificate the CA signed (for servers that check clients).
fn with_client_cert(pki: &TestPki, urls: &[String]) -> Client {
    let mine = pki.client();
    trusting(pki, urls)
        .tls_client_cert(&mine.cert, &mine.key)
        .build()
        .unwrap()
}

/// Asserts that each of the plain `servers` holds `key` with `token` (read
/// in plain text).
fn assert_plain_servers_hold(servers: &[RedisServer], key: &[u8], token: &str) {
    for s in servers {
        assert_eq!(
            s.conn().unwrap().request(&[b"GET", key]).unwrap(),
            redlock_tests::Value::Bulk(token.as_bytes().to_vec())
        );
    }
}

/// Fenced locks over TLS: the fence grows from one lock to the next.
fn fenced_locks(pki: &TestPki, urls: &[String]) {
    let fenced = trusting(pki, urls).fencing(true).build().unwrap();
    let first = fenced
        .lock(b"tls-fenced", TTL)
        .expect("fenced lock over TLS");
    let one = first.fence().expect("a fence");
    fenced.unlock(&first).unwrap();
    let second = fenced
        .lock(b"tls-fenced", TTL)
        .expect("fenced lock over TLS");
    let two = second.fence().expect("a fence");
    assert!(two > one, "fences {one} then {two}");
    let seen = fenced.inspect(b"tls-fenced").unwrap();
    assert_eq!(seen.majority_holder(), Some(second.token().as_bytes()));
    fenced.unlock(&second).unwrap();
}

/// [`lock_extend_inspect_unlock`] with two clients over the `n` servers at
/// `urls`, then [`fenced_locks`].
fn operations_and_fences(pki: &TestPki, urls: &[String], n: usize) {
    let (client, witness) = client_and_witness(pki, urls);
    lock_extend_inspect_unlock(&client, &witness, n);
    fenced_locks(pki, urls);
}

#[test]
fn lock_extend_inspect_unlock_and_fence_over_tls_on_three_servers() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let urls = rediss_all(&s);
    operations_and_fences(&pki, &urls, 3);
}

#[test]
fn lock_extend_inspect_unlock_and_fence_over_tls_on_five_servers_by_name() {
    let pki = pki();
    let s = tls_servers(&pki, 5, TlsOptions::default());
    // By host name: the certificate's DNS name is checked, not its IP.
    let urls = rediss_by_name(&s);
    operations_and_fences(&pki, &urls, 5);
}

#[test]
fn one_client_mixes_plain_and_tls_servers() {
    let pki = pki();
    let tls = tls_servers(&pki, 3, TlsOptions::default());
    let plain = plain_servers(2);
    let mut urls = rediss_all(&tls);
    urls.extend(redis_all(&plain));
    let (client, witness) = client_and_witness(&pki, &urls);
    lock_extend_inspect_unlock(&client, &witness, 5);
    // The plain servers really hold the keys (read in plain text).
    let lock = client.lock(b"mixed", TTL).unwrap();
    let _ = client.inspect(b"mixed").unwrap(); // after every SET
    assert_plain_servers_hold(&plain, b"mixed", lock.token());
    client.unlock(&lock).unwrap();
}

#[test]
fn a_tls_port_addressed_as_plain_and_a_plain_port_addressed_as_tls_are_not_used() {
    let pki = pki();
    let tls = tls_servers(&pki, 4, TlsOptions::default());
    let plain = RedisServer::start().unwrap();
    // A TLS-only server addressed as redis://: it gets RESP where it
    // expects a ClientHello, and closes.
    let plain_to_tls = format!("redis://{}", tls[3].addr());
    // A plain server addressed as rediss://: it gets a ClientHello, reads
    // it as the start of an inline command and waits for its end (redis
    // looks for the newline with strchr, which stops at the hello's first
    // zero byte), so it never answers: the handshake times out.
    let tls_to_plain = format!("rediss://{}", plain.addr());
    // Room for the good servers' handshakes on a loaded machine.
    let connect_timeout = Duration::from_secs(2);

    // Three good servers of five: the majority still locks.
    let mut urls = rediss_all(&tls[..3]);
    urls.extend([plain_to_tls.clone(), tls_to_plain.clone()]);
    let client = trusting(&pki, &urls)
        .connect_timeout(connect_timeout)
        .build()
        .unwrap();
    let lock = client
        .lock(b"res", TTL)
        .expect("a majority of good servers");
    assert!(lock.report().count(ServerOutcome::Ok) >= 3);
    for bad in [3, 4] {
        assert_ne!(lock.report().get(ServerId(bad)), Some(ServerOutcome::Ok));
    }
    let seen = client.inspect(b"res").unwrap();
    assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
    for bad in [3, 4] {
        assert_ne!(seen.entries()[bad].outcome, ServerOutcome::Ok, "{seen:?}");
        assert_eq!(seen.entries()[bad].holder, None, "{seen:?}");
    }
    client.unlock(&lock).unwrap();
    // Nothing reached the plain server as a command.
    assert_eq!(
        plain.conn().unwrap().request(&[b"DBSIZE"]).unwrap(),
        redlock_tests::Value::Integer(0)
    );

    // Two bad of three: the call fails, and the report names both. (The
    // request timeout is longer than the connect timeout: the silent
    // server is given up by the latter.)
    let urls = vec![rediss(&tls[0]), plain_to_tls, tls_to_plain];
    let err = lock_error(
        trusting(&pki, &urls)
            .connect_timeout(connect_timeout)
            .request_timeout(LONG_REQUEST_TIMEOUT),
    );
    let o = unavailable(&err);
    // The TLS port spoken to in plain text fails as a connection does (it
    // closes, or answers with bytes that are no RESP).
    assert!(
        matches!(
            o.get(ServerId(1)),
            Some(ServerOutcome::ConnectionError | ServerOutcome::UnexpectedReply)
        ),
        "{err}"
    );
    assert!(
        !o.refusal(ServerId(1))
            .is_some_and(|t| t.contains(NO_ANSWER)),
        "{err}"
    );
    // The silent plain server is given up by the connect timeout: a
    // connection error (it is tried again later), and the report says why.
    assert_eq!(
        o.get(ServerId(2)),
        Some(ServerOutcome::ConnectionError),
        "{err}"
    );
    let why = o
        .refusal(ServerId(2))
        .unwrap_or_else(|| panic!("no note for {}: {err}", plain.addr()));
    assert!(why.contains(NO_ANSWER), "{err}");
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("{}: connection failed: {NO_ANSWER}", plain.addr())),
        "{shown}"
    );
    assert!(shown.contains(&plain.addr().to_string()), "{shown}");
    assert!(shown.contains(&tls[3].addr().to_string()), "{shown}");
}

/// Answers whatever it reads with a RESP error, as a plain Redis does to a
/// line it cannot run.
fn resp_error(c: &mut TcpStream, _: &[u8], _: &AtomicBool) {
    let _ = c.write_all(b"-ERR unknown command\r\n");
}

#[test]
fn a_peer_that_answers_the_hello_in_resp_or_http_is_not_a_tls_server() {
    let pki = pki();
    let good = RedisServer::start_tls(&pki, TlsOptions::default()).unwrap();
    let resp = Fake::start(resp_error);
    let http = Fake::start(fake::garbage);
    let urls = vec![
        format!("rediss://{}", resp.addr),
        format!("rediss://{}", http.addr),
        rediss(&good),
    ];
    let err = lock_error(trusting(&pki, &urls));
    let o = unavailable(&err);
    for (server, addr) in [(0, &resp.addr), (1, &http.addr)] {
        let why = o.refusal(ServerId(server)).unwrap_or_else(|| {
            panic!("no refusal for {addr}: {err}");
        });
        assert!(why.starts_with(TLS_FAILED), "{err}");
        assert!(why.contains("not a TLS server"), "{err}");
    }
    assert!(err.to_string().contains("not a TLS server"), "{err}");
}

#[test]
fn mutual_tls_works_with_the_client_certificate() {
    let pki = pki();
    let s = tls_servers(&pki, 3, CHECK_CLIENTS);
    let urls = rediss_all(&s);
    lock_extend_inspect_unlock(
        &with_client_cert(&pki, &urls),
        &with_client_cert(&pki, &urls),
        3,
    );
}

#[test]
fn mutual_tls_refuses_a_client_without_a_certificate() {
    let pki = pki();
    let s = tls_servers(&pki, 3, CHECK_CLIENTS);
    let err = lock_error(trusting(&pki, &rediss_all(&s)));
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn mutual_tls_refuses_a_client_certificate_of_another_ca() {
    let pki = pki();
    let s = tls_servers(&pki, 3, CHECK_CLIENTS);
    let foreign = pki.other_ca_client();
    let err =
        lock_error(trusting(&pki, &rediss_all(&s)).tls_client_cert(&foreign.cert, &foreign.key));
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn a_server_certificate_from_an_untrusted_ca_is_refused() {
    let pki = pki();
    let good = tls_servers(&pki, 3, TlsOptions::default());
    // Trusting only the other CA.
    let err = lock_error(trusting(&pki, &rediss_all(&good)).tls_ca_file(pki.other_ca()));
    assert_tls_refused(&err, 2, "unknown CA");
    // Mozilla's roots (the default) do not know the test CA either.
    let err = lock_error(
        Client::builder()
            .servers(rediss_all(&good))
            .retry(0, Duration::ZERO),
    );
    assert_tls_refused(&err, 2, "unknown CA");
    // Servers whose certificates the other CA signed.
    let other = servers_presenting(&pki, 3, ServerCert::OtherCa);
    let err = lock_error(trusting(&pki, &rediss_all(&other)));
    assert_tls_refused(&err, 2, "unknown CA");
}

#[test]
fn a_certificate_for_another_name_is_refused_unless_that_name_is_asked_for() {
    let pki = pki();
    let wrong = servers_presenting(&pki, 3, ServerCert::WrongName);
    // By IP address, and by host name.
    let err = lock_error(trusting(&pki, &rediss_all(&wrong)));
    assert_tls_refused(&err, 2, "not valid for the name");
    let err = lock_error(trusting(&pki, &rediss_by_name(&wrong)));
    assert_tls_refused(&err, 2, "not valid for the name");
    // Asking for the certificate's name instead of the URLs' hosts.
    let named = trusting(&pki, &rediss_all(&wrong))
        .tls_server_name(WRONG_NAME)
        .build()
        .unwrap();
    let lock = named.lock(b"res", TTL).expect("the name asked for");
    named.unlock(&lock).unwrap();

    // And the other way round: good certificates, another name asked for.
    let good = tls_servers(&pki, 3, TlsOptions::default());
    let err = lock_error(trusting(&pki, &rediss_all(&good)).tls_server_name(WRONG_NAME));
    assert_tls_refused(&err, 2, "not valid for the name");
}

#[test]
fn an_expired_certificate_is_refused() {
    let pki = pki();
    let s = servers_presenting(&pki, 3, ServerCert::Expired);
    let err = lock_error(trusting(&pki, &rediss_all(&s)));
    assert_tls_refused(&err, 2, "expired");
}

/// Servers that speak TLS 1.2 only.
const TLS_1_2: [&str; 2] = ["--tls-protocols", "TLSv1.2"];

/// Three TLS servers with `options` and the `extra` arguments.
fn tls_servers_with(pki: &TestPki, options: TlsOptions, extra: &[&str]) -> Vec<RedisServer> {
    (0..3)
        .map(|_| RedisServer::start_tls_with(pki, options, extra).unwrap())
        .collect()
}

fn tls_1_2_servers(pki: &TestPki, options: TlsOptions) -> Vec<RedisServer> {
    tls_servers_with(pki, options, &TLS_1_2)
}

#[test]
fn tls_1_2_servers_work() {
    let pki = pki();
    let no_client_check = tls_1_2_servers(&pki, TlsOptions::default());
    let urls = rediss_all(&no_client_check);
    let (client, witness) = client_and_witness(&pki, &urls);
    lock_extend_inspect_unlock(&client, &witness, 3);
    // And with mutual TLS.
    let mutual = tls_1_2_servers(&pki, CHECK_CLIENTS);
    let urls = rediss_all(&mutual);
    lock_extend_inspect_unlock(
        &with_client_cert(&pki, &urls),
        &with_client_cert(&pki, &urls),
        3,
    );
}

#[test]
fn tls_1_2_servers_refuse_a_client_without_a_certificate() {
    let pki = pki();
    let s = tls_1_2_servers(&pki, CHECK_CLIENTS);
    // TLS 1.2 refuses during the handshake (TLS 1.3 after the client
    // finished it), with a handshake_failure alert (1.2 has no
    // certificate_required): the report should still say why.
    let err = lock_error(trusting(&pki, &rediss_all(&s)));
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn tls_1_2_servers_refuse_a_client_certificate_of_another_ca() {
    let pki = pki();
    let s = tls_1_2_servers(&pki, CHECK_CLIENTS);
    let foreign = pki.other_ca_client();
    let err =
        lock_error(trusting(&pki, &rediss_all(&s)).tls_client_cert(&foreign.cert, &foreign.key));
    assert_tls_refused(&err, 2, "client certificate");
}

#[test]
fn a_server_alert_is_reported() {
    let pki = pki();
    // TLS 1.2 with only a cipher the client does not offer (and that an
    // ECDSA certificate cannot serve): the server ends the handshake with
    // an alert.
    let no_common_cipher = [
        "--tls-protocols",
        "TLSv1.2",
        "--tls-ciphers",
        "DHE-RSA-AES256-SHA256",
    ];
    let s = tls_servers_with(&pki, TlsOptions::default(), &no_common_cipher);
    let err = lock_error(trusting(&pki, &rediss_all(&s)));
    assert_tls_refused(&err, 2, "alert");
    assert!(!err.to_string().contains("client certificate"), "{err}");
}

// The builder reads the files once, and says which one is wrong.

/// The text of a [`Error::TlsSettings`] from building a TLS client with `builder`.
fn tls_error(builder: Builder) -> String {
    match builder.servers(["rediss://127.0.0.1:6379"]).build() {
        Err(Error::TlsSettings(text)) => text,
        Err(other) => panic!("expected Error::TlsSettings, got {other}"),
        Ok(_) => panic!("expected Error::TlsSettings, the client was built"),
    }
}

/// Asserts that nothing of the key file at `key` shows in `text`: neither
/// its PEM lines nor its content whole.
fn assert_no_key_material(text: &str, key: &std::path::Path) {
    let pem = std::fs::read_to_string(key).unwrap();
    for line in pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 8)
    {
        assert!(!text.contains(line), "key material in {text:?}");
    }
    assert!(!text.contains(pem.trim()), "key material in {text:?}");
}

#[test]
fn the_builder_refuses_unusable_ca_files_and_names_them() {
    let pki = pki();
    let dir = pki.dir();

    let missing = dir.join("missing-ca.pem");
    let text = tls_error(Client::builder().tls_ca_file(&missing));
    assert!(text.contains(&missing.display().to_string()), "{text}");

    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "this is not a certificate\n").unwrap();
    let text = tls_error(Client::builder().tls_ca_file(&garbage));
    assert!(text.contains(&garbage.display().to_string()), "{text}");

    let broken = dir.join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\n!!!! not base64 !!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let text = tls_error(Client::builder().tls_ca_file(&broken));
    assert!(text.contains(&broken.display().to_string()), "{text}");

    // A key given where the CA certificate goes: named, never printed.
    let key = pki.server(ServerCert::Good).key;
    let text = tls_error(Client::builder().tls_ca_file(&key));
    assert!(text.contains(&key.display().to_string()), "{text}");
    assert_no_key_material(&text, &key);

    // The error's sentence says it too.
    let err = Client::builder()
        .servers(["rediss://127.0.0.1:6379"])
        .tls_ca_file(&missing)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("missing-ca.pem"), "{err}");
}

#[test]
fn the_builder_refuses_unusable_client_keys_without_printing_them() {
    let pki = pki();
    let dir = pki.dir();
    let client = pki.client();
    let with = |cert: &std::path::Path, key: &std::path::Path| {
        Client::builder()
            .tls_ca_file(pki.ca())
            .tls_client_cert(cert, key)
    };

    // A key that belongs to another certificate.
    let other_key = pki.server(ServerCert::Good).key;
    let text = tls_error(with(&client.cert, &other_key));
    assert!(
        text.contains(&client.cert.display().to_string())
            || text.contains(&other_key.display().to_string()),
        "{text}"
    );
    assert_no_key_material(&text, &other_key);
    assert_no_key_material(&text, &client.key);

    // A missing key, and a missing certificate.
    let missing = dir.join("missing.key");
    let text = tls_error(with(&client.cert, &missing));
    assert!(text.contains(&missing.display().to_string()), "{text}");
    let missing_cert = dir.join("missing-client.pem");
    let text = tls_error(with(&missing_cert, &client.key));
    assert!(text.contains(&missing_cert.display().to_string()), "{text}");
    assert_no_key_material(&text, &client.key);

    // Key files whose content is not a key: their content never shows.
    let secret = "TOP-SECRET-KEY-MATERIAL-0123456789";
    let raw = dir.join("raw.key");
    std::fs::write(&raw, format!("{secret}\n")).unwrap();
    let text = tls_error(with(&client.cert, &raw));
    assert!(text.contains(&raw.display().to_string()), "{text}");
    assert!(!text.contains(secret), "{text}");
    let bogus = dir.join("bogus.key");
    // Valid base64 of the secret, in a PEM private key block.
    let encoded = "VE9QLVNFQ1JFVC1LRVktTUFURVJJQUwtMDEyMzQ1Njc4OQ==";
    std::fs::write(
        &bogus,
        format!("-----BEGIN PRIVATE KEY-----\n{encoded}\n-----END PRIVATE KEY-----\n"),
    )
    .unwrap();
    let err = with(&client.cert, &bogus)
        .servers(["rediss://127.0.0.1:6379"])
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::TlsSettings(_)), "{err}");
    let shown = format!("{err} {err:?}");
    assert!(
        !shown.contains(secret) && !shown.contains(encoded),
        "{shown}"
    );
}

#[test]
fn the_builder_refuses_a_server_name_that_is_not_one() {
    let pki = pki();
    let text = tls_error(
        Client::builder()
            .tls_ca_file(pki.ca())
            .tls_server_name("not a host name"),
    );
    assert!(text.contains("not a host name"), "{text}");
}

#[test]
fn tls_options_with_plain_servers_only_are_unused() {
    let pki = pki();
    let s = plain_servers(3);
    let urls = redis_all(&s);
    let client = pki.client();
    let c = trusting(&pki, &urls)
        .tls_client_cert(&client.cert, &client.key)
        .tls_server_name(WRONG_NAME)
        .build()
        .expect("TLS options do not hinder plain servers");
    let lock = c.lock(b"res", TTL).unwrap();
    let _ = c.inspect(b"res").unwrap(); // after every SET
    assert_plain_servers_hold(&s, b"res", lock.token());
    assert_eq!(c.unlock(&lock).unwrap().deleted(), 3);
}

#[test]
fn the_async_api_rides_the_same_tls_connections() {
    let pki = pki();
    let s = tls_servers(&pki, 3, TlsOptions::default());
    let client = trusting(&pki, &rediss_all(&s)).build_async().unwrap();
    futures::executor::block_on(async {
        let lock = client.lock("async-tls", TTL).await.expect("lock over TLS");
        let seen = client.inspect("async-tls").await.expect("inspect over TLS");
        assert_eq!(seen.majority_holder(), Some(lock.token().as_bytes()));
        let released = client.unlock(&lock).await.expect("unlock over TLS");
        assert_eq!(released.deleted(), 3);
        let seen = client.inspect("async-tls").await.expect("inspect over TLS");
        assert_eq!(seen.majority_holder(), None);
    });
}
