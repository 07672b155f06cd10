//! Snapshot benchmarks (written below).
fn main() {}
