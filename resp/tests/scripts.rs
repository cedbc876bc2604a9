//! The script digests are the SHA1 of the script sources (a real
//! `SCRIPT LOAD` checks them too, in the `redlock-tests` crate).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use redlock_resp::script::{ALL, EXTEND, FENCE_RAISE, RELEASE, Script};

fn sha1_hex(s: &str) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

#[test]
fn digests_match_sources() {
    for Script { source, sha1 } in ALL.into_iter().chain([FENCE_RAISE]) {
        assert_eq!(sha1_hex(source), sha1, "{source}");
        assert_eq!(sha1.len(), 40);
        assert!(
            sha1.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }
}

#[test]
fn scripts_are_the_specification_text() {
    // SPEC R3, verbatim.
    assert_eq!(
        RELEASE.source,
        r#"if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end"#
    );
    // SPEC R4: only PEXPIRE, never SET: a missing key is not re-created.
    assert!(
        EXTEND
            .source
            .contains(r#"redis.call("pexpire",KEYS[1],ARGV[2])"#)
    );
    assert!(!EXTEND.source.to_lowercase().contains("\"set\""));
}
