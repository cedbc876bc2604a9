//! `redlock bench` and `redlock demo`.

use crate::common::*;

#[test]
fn bench_prints_one_json_object() {
    let (_servers, list) = servers(3);
    let out = run(redlock().args([
        "bench",
        "--servers",
        &list,
        "--clients",
        "2",
        "--duration",
        "300ms",
        "--json",
    ]));
    assert_eq!(code(&out), 0, "stderr: {}", stderr(&out));
    let json = stdout(&out);
    assert_eq!(json.trim().lines().count(), 1, "{json}");
    for key in [
        "\"servers\": 3",
        "\"clients\": 2",
        "\"resources\": \"distinct\"",
        "\"cycles\": ",
        "\"cycles_per_sec\": ",
        "\"acquire_us\": {\"p50\": ",
        "\"p999\": ",
        "\"release_us\": {",
        "\"conflicts\": 0",
        "\"errors\": 0",
    ] {
        assert!(json.contains(key), "{key} missing in {json}");
    }
    assert!(!json.contains("\"cycles\": 0,"), "{json}");
}

#[test]
fn the_demo_runs_to_completion_and_leaves_no_server_behind() {
    let out = run(redlock().args(["demo", "--duration", "2s"]));
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "stdout: {text}\nstderr: {}", stderr(&out));
    assert!(text.contains("no two overlapped: yes"), "{text}");
    assert!(text.contains("killed the redis-servers"), "{text}");
    demo_explains_itself(&text);
    assert!(text.contains("every server stopped"), "{text}");
    let ports: Vec<u16> = text
        .lines()
        .find_map(|l| l.strip_prefix("servers: "))
        .unwrap()
        .split(", ")
        .map(|a| a.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ports.len(), 5);
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "a redis-server still listens on {port}"
        );
    }
}

#[test]
fn ctrl_c_stops_the_demo_and_a_waiting_lock_cleanly() {
    // The demo: interrupted half-way, it still stops every server.
    let mut child = start(redlock().args(["demo", "--duration", "60s"]));
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut ports = Vec::new();
    let mut line = String::new();
    while ports.is_empty() {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "no servers line"
        );
        if let Some(list) = line.trim().strip_prefix("servers: ") {
            ports = list
                .split(", ")
                .map(|a| a.rsplit(':').next().unwrap().parse::<u16>().unwrap())
                .collect();
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    send_signal("INT", &child.id().to_string());
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let out = finish(child);
    assert_eq!(code(&out), 130, "stderr: {}", stderr(&out));
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "a redis-server still listens on {port}"
        );
    }

    // A lock waiting for a held resource: interrupted, it gives up at once.
    let (_servers, list) = servers(3);
    let out = run(redlock().args(["acquire", "--servers", &list, "busy"]));
    assert_eq!(code(&out), 0);
    let waiter = start(redlock().args([
        "lock",
        "--servers",
        &list,
        "--wait",
        "60s",
        "busy",
        "--",
        "true",
    ]));
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    send_signal("INT", &waiter.id().to_string());
    let out = finish(waiter);
    assert_eq!(code(&out), 130, "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "did not stop waiting"
    );
}

/// Issue 10, item 6: `demo --servers` stops no server and claims to stop
/// none; it deletes the keys it made there (its fence counter too, which
/// never expires on its own), also when interrupted; its help says why
/// fence counters never expire.
#[test]
fn the_demo_on_given_servers_leaves_them_running_and_clean() {
    let (servers, list) = servers(3);
    let keys = |s: &RedisServer| match s
        .conn()
        .unwrap()
        .request(&[b"KEYS", b"redlock-demo*"])
        .unwrap()
    {
        Value::Aggregate(_, keys) => keys,
        other => panic!("KEYS: {other:?}"),
    };
    let out = run(redlock().args(["demo", "--servers", &list, "--duration", "1"]));
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
    demo_explains_itself(&text);
    assert!(
        !text.contains("stopped") && !text.contains("killed"),
        "{text}"
    );
    assert!(text.contains("from 3 of 3 servers, left running"), "{text}");
    assert!(text.contains(":fence"), "{text}");
    for s in &servers {
        assert_eq!(
            s.conn().unwrap().request(&[b"PING"]).unwrap(),
            Value::Simple(b"PONG".to_vec())
        );
        assert_eq!(keys(s), Vec::<Value>::new(), "keys left behind");
    }

    // Interrupted half-way: the keys go all the same.
    let mut child = Running::new(start(redlock().args([
        "demo",
        "--servers",
        &list,
        "--duration",
        "60",
    ])));
    let give_up = Instant::now() + Duration::from_secs(20);
    while servers.iter().all(|s| keys(s).is_empty()) {
        assert!(Instant::now() < give_up, "the demo never took its lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    send_signal("INT", &child.pid().to_string());
    let stdout_pipe = child.child.as_mut().unwrap().stdout.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut { stdout_pipe }, &mut std::io::sink()));
    let out = child.finish();
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed the demo's keys"),
        "{}",
        stderr(&out)
    );
    for s in &servers {
        assert_eq!(keys(s), Vec::<Value>::new(), "keys left behind");
    }

    let help = stdout(&run(redlock().args(["demo", "--help"])));
    assert!(help.contains("never expires"), "{help}");
    assert!(help.contains("backwards"), "{help}");
}
