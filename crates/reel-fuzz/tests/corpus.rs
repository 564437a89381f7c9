//! Replays every file of `corpus/<target>/` through its target, so the corpora (seeds,
//! and the inputs past findings were fixed with) keep being checked by a plain
//! `cargo test`, without the fuzzer.

use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

#[test]
fn every_corpus_file_runs_through_its_target() {
    let mut total = 0;
    for (name, run) in reel_fuzz::TARGETS {
        let dir = corpus().join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a corpus entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: no corpus in {}", dir.display());
        for f in &files {
            let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let r = std::panic::catch_unwind(|| run(&data));
            assert!(r.is_ok(), "{name}: {} panicked", f.display());
        }
        total += files.len();
    }
    println!("{total} corpus files replayed through {} targets", reel_fuzz::TARGETS.len());
}

#[test]
fn every_corpus_folder_is_a_target() {
    for e in std::fs::read_dir(corpus()).expect("the corpus folder") {
        let name = e.expect("a corpus folder").file_name();
        let name = name.to_string_lossy();
        assert!(reel_fuzz::TARGETS.iter().any(|(t, _)| *t == name), "corpus/{name} has no target");
    }
}
