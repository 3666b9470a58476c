//! bf has no build step. This script exists so that Cargo.toml's `[build-dependencies]` can ask for
//! the features the tests' build turns on in crates that other build scripts use: with them, the
//! demo's build and the tests' build share those crates, and what is built on them (psm, stacker,
//! all of DataFusion) is not built twice.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
