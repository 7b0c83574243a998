//! `wring`: the command line on top of wring's library crates.
fn main() {}
