//! Every SIMD path of the kernels writes the same compressed bytes (docs/determinism.md): the
//! binary runs under each `LMZIP_SIMD` value this CPU supports, with both models, training with
//! SGD and with Adam through TBPTT, on widths that are not multiples of the lane count, and each
//! path decodes the others' output. The kernel-level bit checks are in src/kernels.

mod common;

use std::process::Output;

use common::cli::{BIN, assert_usage_error, ok, output};
use common::{binary, text};
use lmzip::kernels::{SIMD_ENV_VAR, SimdPath};

/// Runs lmzip with `LMZIP_SIMD=simd`.
fn lmzip(simd: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = assert_cmd::Command::new(BIN);
    cmd.env(SIMD_ENV_VAR, simd).args(args);
    output(cmd, stdin)
}

/// Model and schedule: Mamba-1 36 wide (tails after 32-wide blocks), RWKV-7 one head of 64 and
/// two blocks (its value residual needs the second); SGD one-step then Adam with TBPTT.
const CASES: [(&str, &str); 2] = [
    (
        "mamba1",
        "cfg:hidden=36,layers=2 0..1K:train(opt=sgd,lr=0.05,bptt=1) 1K..:train(opt=adam,lr=0.002,bptt=8)",
    ),
    (
        "rwkv7",
        "cfg:hidden=64,layers=2 0..1K:train(opt=sgd,lr=0.05,bptt=1) 1K..:train(opt=adam,lr=0.002,bptt=8)",
    ),
];

#[test]
fn every_path_writes_the_same_bytes_and_decodes_the_others() {
    let paths = SimdPath::available();
    #[cfg(target_arch = "x86_64")]
    for (feature, path) in [
        (std::arch::is_x86_feature_detected!("avx2"), SimdPath::Avx2),
        (
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx2"),
            SimdPath::Avx512,
        ),
    ] {
        assert_eq!(
            paths.contains(&path),
            feature,
            "{} is offered exactly where the CPU has it",
            path.name()
        );
    }
    let mut input = text(2500);
    input.extend(binary(700, 3));
    for (model, recipe) in CASES {
        let args = ["compress", "-c", "--model", model, "--recipe", recipe];
        let outputs: Vec<(SimdPath, Vec<u8>)> = paths
            .iter()
            .map(|p| (*p, ok(lmzip(p.name(), &args, &input)).stdout))
            .collect();
        let (first_path, first) = &outputs[0];
        for (path, bytes) in &outputs[1..] {
            assert!(
                bytes == first,
                "{model}: {} and {} wrote different bytes",
                first_path.name(),
                path.name()
            );
        }
        // One decoder per path reads the (common) stream.
        for p in &paths {
            let back = ok(lmzip(p.name(), &["decompress", "-c"], first)).stdout;
            assert!(back == input, "{model}: {} does not decode", p.name());
        }
    }
}

#[test]
fn auto_is_the_default_and_a_bad_value_is_a_usage_error() {
    let input = text(300);
    let tiny = ["compress", "-c", "--hidden", "16", "--layers", "1"];
    let auto = ok(lmzip("auto", &tiny, &input)).stdout;
    let portable = ok(lmzip("portable", &tiny, &input)).stdout;
    assert_eq!(auto, portable);

    let out = lmzip("avx9", &tiny, &input);
    assert_usage_error(&out, "lmzip: LMZIP_SIMD=\"avx9\" is not a SIMD path");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("portable, avx2, avx512"),
        "the paths are listed"
    );
    for p in SimdPath::ALL.into_iter().filter(|p| !p.is_available()) {
        assert_usage_error(&lmzip(p.name(), &tiny, &input), "this CPU cannot run");
    }
}
