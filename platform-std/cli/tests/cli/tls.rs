//! `rediss://` end to end: the command against TLS-only `redis-server`
//! processes (the harness's [`TestPki`] and [`RedisServer::start_tls`]),
//! with `--tls-ca`, `--tls-cert`/`--tls-key` and `--tls-server-name`; what
//! a refused handshake says; and bad TLS settings as usage errors (64) that
//! never print a key.
//!
//! A TLS-only server cannot be asked in plain text (`RedisServer::conn`
//! refuses), so what the servers hold is read back with `redlock inspect`.

use redlock_tests::tls::{ServerCert, TestPki, TlsOptions, WRONG_NAME};

use crate::common::*;

/// `n` TLS-only servers with `options`, and their list as
/// `rediss://127.0.0.1:P,...`.
fn tls_servers(pki: &TestPki, options: TlsOptions, n: usize) -> (Vec<RedisServer>, String) {
    let servers: Vec<RedisServer> = (0..n)
        .map(|_| RedisServer::start_tls(pki, options).unwrap())
        .collect();
    let list = servers
        .iter()
        .map(|s| format!("rediss://{}", s.addr()))
        .collect::<Vec<_>>()
        .join(",");
    (servers, list)
}

/// Servers that present `cert` and do not ask for client certificates.
fn with_cert(cert: ServerCert) -> TlsOptions {
    TlsOptions {
        cert,
        auth_clients: false,
    }
}

/// Servers that require a client certificate signed by the PKI's CA.
const CHECK_CLIENTS: TlsOptions = TlsOptions {
    cert: ServerCert::Good,
    auth_clients: true,
};

fn arg(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The first field of `acquire`'s line: the token.
fn acquired(out: &Output) -> String {
    assert_eq!(code(out), 0, "stderr: {}", stderr(out));
    let token = stdout(out).split_whitespace().next().unwrap().to_string();
    assert_eq!(token.len(), 40, "{}", stdout(out));
    token
}

/// A failure that refused every server: 69, one line that names each server
/// by address and gives `reason` after "TLS failed" (a server may be "not
/// asked" once a majority refused), nothing on stdout.
fn refused_everywhere(what: &str, out: &Output, servers: &[RedisServer], reason: &str) {
    assert_eq!(code(out), 69, "{what}: stderr: {}", stderr(out));
    let err = stderr(out);
    assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
    assert!(err.contains("TLS failed"), "{what}: {err}");
    assert!(err.contains(reason), "{what}: {err}");
    for s in servers {
        assert!(err.contains(&s.addr().to_string()), "{what}: {err}");
    }
    assert!(stdout(out).is_empty(), "{what}: {}", stdout(out));
}

/// `redlock inspect --json RESOURCE` with `args` (the servers and TLS
/// options): it exits 0; its JSON.
fn inspect_json(args: &[&str], resource: &str) -> String {
    let out = run(redlock()
        .arg("inspect")
        .args(args)
        .args(["--json", resource]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    stdout(&out)
}

/// Asserts that `text` (what `inspect` prints) says a majority holds the
/// lock with `token`.
fn assert_held_by_majority(text: &str, token: &str) {
    assert!(
        text.contains(&format!("held by a majority: {token}")),
        "{text}"
    );
}

/// The line of `text` (what `inspect` prints) about the server at `addr`.
fn line_for<'a>(text: &'a str, addr: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(addr))
        .unwrap_or_else(|| panic!("no line for {addr}: {text}"))
}

/// Asserts that `unlock` exited 0 and released the lock on all 3 servers.
fn assert_deleted_on_all_3(out: &Output) {
    assert_eq!(code(out), 0, "stderr: {}", stderr(out));
    assert!(stdout(out).contains("deleted on 3 of 3"), "{}", stdout(out));
}

#[test]
fn acquire_inspect_unlock_over_tls() {
    let pki = TestPki::new().unwrap();
    let (servers, list) = tls_servers(&pki, TlsOptions::default(), 3);
    let ca = arg(&pki.ca());
    let tls = ["--servers", &list, "--tls-ca", &ca];

    let out = run(redlock()
        .arg("acquire")
        .args(tls)
        .args(["--ttl", "20s", "tls-lock"]));
    let token = acquired(&out);
    let validity: u64 = stdout(&out)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(validity > 15_000 && validity <= 20_000, "{validity}");
    // Held: a second acquire conflicts (75).
    let out = run(redlock().arg("acquire").args(tls).args(["-n", "tls-lock"]));
    assert_eq!(code(&out), 75, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains(&token), "{}", stderr(&out));

    // inspect: held by the token on every server, so by a majority.
    let out = run(redlock().arg("inspect").args(tls).arg("tls-lock"));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let text = stdout(&out);
    assert_held_by_majority(&text, &token);
    for s in &servers {
        let line = line_for(&text, &s.addr().to_string());
        assert!(line.contains("held") && line.contains(&token), "{text}");
    }
    let json = inspect_json(&tls, "tls-lock");
    assert_majority_holder(&json, &token);
    assert_eq!(json.matches("\"held\": true").count(), 3, "{json}");
    assert_eq!(json.matches("\"answered\": true").count(), 3, "{json}");
    assert!(!json.contains("\"error\""), "{json}");

    // unlock releases on every server.
    let out = run(redlock().arg("unlock").args(tls).args(["tls-lock", &token]));
    assert_deleted_on_all_3(&out);
    let json = inspect_json(&tls, "tls-lock");
    assert!(json.contains("\"majority_holder\": null"), "{json}");
    assert_eq!(json.matches("\"held\": false").count(), 3, "{json}");
}

#[test]
fn lock_runs_a_command_under_a_lock_over_tls() {
    let pki = TestPki::new().unwrap();
    let (_servers, list) = tls_servers(&pki, TlsOptions::default(), 3);
    let ca = arg(&pki.ca());
    let tls = ["--servers", &list, "--tls-ca", &ca];
    let dir = scratch("tls-lock");
    // Writes its resource, token and process group, waits for `go`, exits 3.
    let script = format!(
        "echo \"$REDLOCK_RESOURCE $REDLOCK_TOKEN $$\" > {d}/started.tmp && mv {d}/started.tmp {d}/started; \
         while [ ! -e {d}/go ]; do sleep 0.02; done; exit 3",
        d = dir.display()
    );
    let mut running = Running::new(start(
        redlock()
            .arg("lock")
            .args(tls)
            .args(["tls-job", "--", "sh", "-c", &script]),
    ));
    wait_for_file(&dir.join("started"));
    let seen = std::fs::read_to_string(dir.join("started")).unwrap();
    let fields: Vec<&str> = seen.split_whitespace().collect();
    let [resource, token, pgid] = fields[..] else {
        panic!("{seen}");
    };
    running.groups.push(pgid.parse().unwrap());
    assert_eq!(resource, "tls-job");
    assert_eq!(token.len(), 40);

    // While the command runs, every server holds the key with its token;
    // another lock on it conflicts.
    let json = inspect_json(&tls, "tls-job");
    assert_majority_holder(&json, token);
    assert_eq!(
        json.matches(&format!("\"token\": \"{token}\"")).count(),
        3,
        "{json}"
    );
    let out = run(redlock()
        .arg("lock")
        .args(tls)
        .args(["-n", "tls-job", "--", "true"]));
    assert_eq!(code(&out), 75, "stderr: {}", stderr(&out));

    std::fs::write(dir.join("go"), "").unwrap();
    let out = running.finish();
    assert_eq!(code(&out), 3, "stderr: {}", stderr(&out));
    // Released when the command exited.
    let json = inspect_json(&tls, "tls-job");
    assert!(json.contains("\"majority_holder\": null"), "{json}");

    // rediss://localhost:P passes the name check as well (the certificates
    // name localhost and 127.0.0.1).
    let by_name = list.replace("rediss://127.0.0.1:", "rediss://localhost:");
    let out = run(redlock()
        .args(["lock", "--servers", &by_name, "--tls-ca", &ca])
        .args(["tls-job", "--", "sh", "-c", "test ${#REDLOCK_TOKEN} = 40"]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn servers_that_require_client_certificates() {
    let pki = TestPki::new().unwrap();
    let (servers, list) = tls_servers(&pki, CHECK_CLIENTS, 3);
    let ca = arg(&pki.ca());
    let client = pki.client();
    let (cert, key) = (arg(&client.cert), arg(&client.key));

    // With the CA's client certificate: works.
    let with_cert = |args: &[&str]| {
        run(redlock()
            .arg(args[0])
            .args(["--servers", &list, "--tls-ca", &ca])
            .args(["--tls-cert", &cert, "--tls-key", &key])
            .args(&args[1..]))
    };
    let token = acquired(&with_cert(&["acquire", "--ttl", "20s", "authed"]));
    let out = with_cert(&["inspect", "authed"]);
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    assert_held_by_majority(&stdout(&out), &token);
    assert_deleted_on_all_3(&with_cert(&["unlock", "authed", &token]));
    let out = with_cert(&["lock", "authed", "--", "true"]);
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));

    // Without one: 69, saying the server wanted a client certificate.
    for args in [
        vec!["acquire", "--retries", "0", "authed"],
        vec!["lock", "--retries", "0", "authed", "--", "true"],
        vec!["unlock", "authed", &token],
    ] {
        let out = run(redlock()
            .arg(args[0])
            .args(["--servers", &list, "--tls-ca", &ca])
            .args(&args[1..]));
        refused_everywhere(
            &format!("{args:?} without a client certificate"),
            &out,
            &servers,
            "client certificate",
        );
    }
    // One from another CA is refused the same way.
    let other = pki.other_ca_client();
    let out = run(redlock()
        .args(["acquire", "--servers", &list, "--tls-ca", &ca])
        .args([
            "--tls-cert",
            &arg(&other.cert),
            "--tls-key",
            &arg(&other.key),
        ])
        .args(["--retries", "0", "authed"]));
    refused_everywhere(
        "a client certificate from the other CA",
        &out,
        &servers,
        "client certificate",
    );
}

#[test]
fn a_wrong_ca_a_wrong_name_or_an_expired_certificate_is_refused_with_the_reason() {
    let pki = TestPki::new().unwrap();
    let (good, good_list) = tls_servers(&pki, TlsOptions::default(), 3);
    let ca = arg(&pki.ca());
    let other_ca = arg(&pki.other_ca());
    let acquire = |list: &str, extra: &[&str]| {
        run(redlock()
            .args(["acquire", "--servers", list, "--retries", "0"])
            .args(extra)
            .arg("checked"))
    };

    // The other CA, or the built-in roots: an unknown CA.
    let out = acquire(&good_list, &["--tls-ca", &other_ca]);
    refused_everywhere("--tls-ca the other CA", &out, &good, "unknown CA");
    let out = acquire(&good_list, &[]);
    refused_everywhere("the built-in roots", &out, &good, "unknown CA");
    // A name the certificates do not carry.
    let out = acquire(
        &good_list,
        &["--tls-ca", &ca, "--tls-server-name", WRONG_NAME],
    );
    refused_everywhere(
        "--tls-server-name wrong.example",
        &out,
        &good,
        "not valid for the name",
    );

    // Certificates for wrong.example only: refused when reached by
    // address, accepted with --tls-server-name wrong.example.
    let (wrong, wrong_list) = tls_servers(&pki, with_cert(ServerCert::WrongName), 3);
    let out = acquire(&wrong_list, &["--tls-ca", &ca]);
    refused_everywhere(
        "a wrong-name certificate",
        &out,
        &wrong,
        "not valid for the name",
    );
    acquired(&acquire(
        &wrong_list,
        &["--tls-ca", &ca, "--tls-server-name", WRONG_NAME],
    ));

    // Expired certificates.
    let (expired, expired_list) = tls_servers(&pki, with_cert(ServerCert::Expired), 3);
    let out = acquire(&expired_list, &["--tls-ca", &ca]);
    refused_everywhere("an expired certificate", &out, &expired, "has expired");

    // Certificates from the other CA: accepted when that CA is trusted.
    let (other, other_list) = tls_servers(&pki, with_cert(ServerCert::OtherCa), 3);
    let out = acquire(&other_list, &["--tls-ca", &ca]);
    refused_everywhere("the other CA's servers", &out, &other, "unknown CA");
    acquired(&acquire(&other_list, &["--tls-ca", &other_ca]));
}

/// `inspect` shows why each server was not used, in text and in its JSON
/// `error` field; a majority that answered is enough.
#[test]
fn inspect_shows_why_a_server_was_not_used() {
    let pki = TestPki::new().unwrap();
    let ca = arg(&pki.ca());
    let (_good, good_list) = tls_servers(&pki, TlsOptions::default(), 2);
    let expired = RedisServer::start_tls(&pki, with_cert(ServerCert::Expired)).unwrap();
    let list = format!("{good_list},rediss://{}", expired.addr());
    let tls = ["--servers", &list, "--tls-ca", &ca];

    // Two of three: the lock is taken.
    let token = acquired(&run(redlock()
        .arg("acquire")
        .args(tls)
        .args(["--ttl", "20s", "partial"])));

    let json = inspect_json(&tls, "partial");
    assert_majority_holder(&json, &token);
    assert_eq!(json.matches("\"held\": true").count(), 2, "{json}");
    assert_eq!(json.matches("\"answered\": false").count(), 1, "{json}");
    let entry = json
        .split("\"server\": ")
        .find(|e| e.starts_with(&format!("\"{}\"", expired.addr())))
        .unwrap_or_else(|| panic!("no entry for {}: {json}", expired.addr()));
    let error = entry
        .split("\"error\": \"")
        .nth(1)
        .unwrap_or_else(|| panic!("no error field: {json}"));
    assert!(
        error.starts_with("not used: TLS failed: ") && error.contains("has expired"),
        "{json}"
    );
    assert!(!entry.contains("\"held\""), "{json}");

    let out = run(redlock().arg("inspect").args(tls).arg("partial"));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let text = stdout(&out);
    let line = line_for(&text, &expired.addr().to_string());
    assert!(
        line.contains("error") && line.contains("TLS failed") && line.contains("has expired"),
        "{text}"
    );
    assert_held_by_majority(&text, &token);

    // Every server refuses (no client certificate): 69, and the JSON still
    // says why for each.
    let (authed, authed_list) = tls_servers(&pki, CHECK_CLIENTS, 3);
    let out = run(redlock().args([
        "inspect",
        "--servers",
        &authed_list,
        "--tls-ca",
        &ca,
        "--json",
        "partial",
    ]));
    assert_eq!(code(&out), 69, "stderr: {}", stderr(&out));
    let json = stdout(&out);
    assert_eq!(json.matches("\"answered\": false").count(), 3, "{json}");
    for s in &authed {
        assert!(
            json.contains(&format!("\"server\": \"{}\"", s.addr())),
            "{json}"
        );
    }
    let errors: Vec<&str> = json.split("\"error\": \"").skip(1).collect();
    assert_eq!(errors.len(), 3, "{json}");
    for e in errors {
        assert!(
            e.starts_with("not used: TLS failed: ") && e.contains("client certificate"),
            "{json}"
        );
    }
    assert!(json.contains("\"majority_holder\": null"), "{json}");
    assert!(
        stderr(&out).contains("only 0 of 3 servers answered"),
        "{}",
        stderr(&out)
    );
}

/// Bad TLS settings are usage errors (64), on every subcommand that takes
/// servers: one line starting "TLS settings: " that names the file, never
/// what a key file holds.
#[test]
fn bad_tls_settings_exit_64_naming_the_file_and_never_the_key() {
    let pki = TestPki::new().unwrap();
    // Live servers: only the settings are wrong.
    let (_servers, list) = tls_servers(&pki, TlsOptions::default(), 3);
    let ca = arg(&pki.ca());
    let client = pki.client();
    let (cert, key) = (arg(&client.cert), arg(&client.key));
    let other_key = arg(&pki.other_ca_client().key);
    let missing = arg(&pki.dir().join("no-such-ca.pem"));
    let not_pem = pki.dir().join("not-a-certificate.txt");
    std::fs::write(&not_pem, "just some text\n").unwrap();
    let not_pem = arg(&not_pem);
    let tokens = "0".repeat(40);

    // The key files' PEM bodies: none of their lines may ever be printed.
    let secrets: Vec<String> = [&client.key, &pki.other_ca_client().key]
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("-----") && l.len() > 8)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!secrets.is_empty());

    let subcommands: Vec<Vec<&str>> = vec![
        vec!["lock", "res", "--", "true"],
        vec!["acquire", "res"],
        vec!["unlock", "res", &tokens],
        vec!["inspect", "res"],
        vec!["fence-repair", "--at-least", "1", "res"],
        vec!["bench", "--duration", "1s"],
        vec!["demo", "--duration", "1s"],
    ];
    // (settings, what the message must contain)
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--tls-cert", &cert], vec!["--tls-cert", "--tls-key"]),
        (vec!["--tls-key", &key], vec!["--tls-key", "--tls-cert"]),
        (vec!["--tls-ca", &missing], vec!["TLS settings: ", &missing]),
        (vec!["--tls-ca", &not_pem], vec!["TLS settings: ", &not_pem]),
        // A key is no CA certificate.
        (vec!["--tls-ca", &key], vec!["TLS settings: ", &key]),
        (
            vec![
                "--tls-ca",
                &ca,
                "--tls-cert",
                &cert,
                "--tls-key",
                &other_key,
            ],
            vec!["TLS settings: ", &cert, &other_key],
        ),
        (
            vec!["--tls-ca", &ca, "--tls-cert", &key, "--tls-key", &key],
            vec!["TLS settings: ", &key],
        ),
        (
            vec!["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &missing],
            vec!["TLS settings: ", &missing],
        ),
        (
            vec!["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &cert],
            vec!["TLS settings: ", &cert],
        ),
    ];
    for (settings, expected) in &cases {
        for sub in &subcommands {
            let what = format!("{} {settings:?}", sub[0]);
            let out = run(redlock()
                .arg(sub[0])
                .args(["--servers", &list])
                .args(settings)
                .args(&sub[1..]));
            assert_eq!(code(&out), 64, "{what}: {}", stderr(&out));
            let err = stderr(&out);
            assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
            for e in expected {
                assert!(err.contains(e), "{what}: {e:?} not in {err}");
            }
            if expected.contains(&"TLS settings: ") {
                let prefix = format!("redlock {}: TLS settings: ", sub[0]);
                assert!(err.starts_with(&prefix), "{what}: {err}");
            }
            assert!(stdout(&out).is_empty(), "{what}: {}", stdout(&out));
            for printed in [&err, &stdout(&out)] {
                assert!(!printed.contains("-----BEGIN"), "{what}: {printed}");
                for s in &secrets {
                    assert!(!printed.contains(s.as_str()), "{what}: a key's line");
                }
            }
        }
    }
}
