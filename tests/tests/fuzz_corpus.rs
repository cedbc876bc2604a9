//! Replays the saved fuzz corpus of `redlock-resp` (`fuzz/corpus/parse_reply`) through the
//! fuzz target's own invariant, on stable, so CI checks what the fuzzer found
//! without fuzzing. It lives here, not in `resp/`, because the corpus is not
//! part of the published `redlock-resp` package.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

#[path = "../../fuzz/check.rs"]
mod check;

#[test]
fn saved_corpus_upholds_the_fuzz_invariant() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/parse_reply");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus folder") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        check::check(&data);
        files += 1;
    }
    assert!(files > 40, "only {files} corpus files in {}", dir.display());
}
