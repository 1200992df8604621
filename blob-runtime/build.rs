//! Writes the table between const-generic dims and typenum integers that
//! compile-time dim arithmetic goes through (`typed::twin`): for every
//! `N` up to `TWIN_MAX`, `D<N>`'s typenum twin and the way back (larger
//! numbers go back through `Thousands`, in `typed::twin`).

use std::fmt::Write as _;

/// Largest dim with compile-time arithmetic. Each entry is two small trait
/// impls; 4096 of them keep the crate's build and every lookup cheap, where
/// 16384 would take seconds per thousand lookups downstream.
const TWIN_MAX: usize = 4096;

fn main() {
    let mut out = String::new();
    let _ = writeln!(out, "/// Largest dim with compile-time arithmetic.");
    let _ = writeln!(out, "pub const TWIN_MAX: usize = {TWIN_MAX};");
    // T<n> as a binary chain, built from T<n / 2>: each line stays short.
    let _ = writeln!(out, "#[doc(hidden)] pub type T0 = typenum::UTerm;");
    let _ = writeln!(out, "/// `TWIN_MAX` as a typenum integer.");
    let _ = writeln!(out, "pub type TMax = T{TWIN_MAX};");
    for n in 1..=TWIN_MAX {
        let bit = if n % 2 == 1 { "B1" } else { "B0" };
        let _ = writeln!(
            out,
            "#[doc(hidden)] pub type T{n} = typenum::UInt<T{}, typenum::{bit}>;",
            n / 2
        );
    }
    for n in 0..=TWIN_MAX {
        let _ = writeln!(out, "impl Twin for D<{n}> {{ type T = T{n}; }}");
        let _ = writeln!(out, "impl TableDim for T{n} {{ type Dim = D<{n}>; }}");
    }
    let path = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("twins.rs");
    std::fs::write(path, out).expect("OUT_DIR is writable");
    println!("cargo::rerun-if-changed=build.rs");
}
