//! The build a newcomer makes twice: `cargo run -- demo`, then `cargo test`. A dev-dependency that
//! turns on a feature of a crate bf's code also builds changes that crate's build, and everything
//! above it is built again (regex under arrow and DataFusion took deltalake with it: minutes).

use std::collections::BTreeSet;
use std::process::Command;

/// Every package of a `cargo tree` with its features, one line each.
fn tree(edges: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--locked", "--offline", "--prefix", "none", "-f", "{p} {f}", "-e", edges])
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

/// Each crate the binary builds is built with the same features when the tests are built: the
/// tests reuse the binary's build of deltalake, DataFusion and arrow.
#[test]
fn the_tests_build_every_crate_of_the_binary_with_its_features() {
    let binary = tree("normal,build");
    let tests = tree("normal,build,dev");
    // bf itself is built with its `cluster` and `test-hooks` features for the tests (its
    // dev-dependency on itself): only bf's own crate is built again for it, and the crates the
    // cluster adds.
    let ours = |l: &&String| l.starts_with("bf v");
    let bf: Vec<&String> = tests.iter().filter(ours).collect();
    assert!(
        !bf.is_empty() && bf.iter().all(|l| l.trim_end_matches(" (*)").ends_with(" cluster,test-hooks")),
        "{bf:?}"
    );
    let changed: Vec<&String> = binary.difference(&tests).filter(|l| !ours(l)).collect();
    assert!(
        changed.is_empty(),
        "these crates are built with other features when the tests are built (the test build's line \
         for the same package is in `cargo tree -e normal,build,dev`): {changed:#?}"
    );
    assert!(binary.iter().any(|l| l.starts_with("deltalake-core ")), "{binary:?}");
}
