//! Every `.cu` source compiles with NVRTC, and its PTX defines exactly the
//! kernels its launchers call, with the parameter types they push. Needs
//! no GPU, only libnvrtc (CI installs the `nvidia-cuda-nvrtc` wheel and
//! points LD_LIBRARY_PATH at it); without NVRTC the tests fail rather than
//! pass without compiling anything, unless BLOBFLOW_SKIP_NVRTC says why.
#![cfg(feature = "cuda")]

use blob_kernels::cuda::{self, KernelSig, KernelSource, PtxType};

fn nvrtc_or_skip() -> bool {
    if cuda::nvrtc_available() {
        return true;
    }
    if let Ok(why) = std::env::var("BLOBFLOW_SKIP_NVRTC") {
        eprintln!("skipped: NVRTC not loadable ({why})");
        return false;
    }
    panic!(
        "NVRTC could not be loaded: install nvidia-cuda-nvrtc==13.0.88 and add its lib directory to LD_LIBRARY_PATH"
    );
}

#[test]
fn every_launcher_matches_its_kernel_in_the_ptx() {
    if !nvrtc_or_skip() {
        return;
    }
    for source in cuda::SOURCES {
        let ptx = source.compile().unwrap_or_else(|e| panic!("{e}"));
        source.check_ptx(&ptx).unwrap_or_else(|e| panic!("{e}"));
        let entries = cuda::ptx_entries(&ptx);
        assert_eq!(
            entries.len(),
            source.sigs().count(),
            "{}: one launcher per kernel",
            source.file
        );
    }
}

/// The check fails on each kind of drift between a `.cu` file and its
/// launchers, on real NVRTC output.
#[test]
fn a_renamed_or_retyped_kernel_is_caught() {
    if !nvrtc_or_skip() {
        return;
    }
    static RENAMED: KernelSource = KernelSource {
        file: "renamed.cu",
        text: r#"extern "C" __global__ void scale_f32(long long n, float a, float* y) {}"#,
        kernels: &[&[KernelSig {
            name: "scale_f64",
            params: &[PtxType::U64, PtxType::F32, PtxType::U64],
        }]],
    };
    let err = RENAMED.check_ptx(&RENAMED.compile().unwrap()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("scale_f64 is launched but not defined"),
        "{msg}"
    );
    assert!(
        msg.contains("scale_f32 is defined but no launcher calls it"),
        "{msg}"
    );

    static RETYPED: KernelSource = KernelSource {
        file: "retyped.cu",
        text: r#"extern "C" __global__ void scale_f32(long long n, double a, float* y, int k) {}"#,
        kernels: &[&[KernelSig {
            name: "scale_f32",
            params: &[PtxType::U64, PtxType::F32, PtxType::U64],
        }]],
    };
    let msg = RETYPED
        .check_ptx(&RETYPED.compile().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("scale_f32: the launcher pushes (u64, f32, u64) but the kernel takes (u64, f64, u64, u32)"),
        "{msg}"
    );
}

#[test]
fn a_source_that_does_not_compile_says_where() {
    if !nvrtc_or_skip() {
        return;
    }
    static BROKEN: KernelSource = KernelSource {
        file: "broken.cu",
        text: "extern \"C\" __global__ void f(float* y) { y[0] = undefined_name; }",
        kernels: &[],
    };
    let msg = BROKEN.compile().unwrap_err().to_string();
    assert!(
        msg.starts_with("NVRTC could not compile broken.cu"),
        "{msg}"
    );
    assert!(msg.contains("undefined_name"), "{msg}");
}

/// Driver 580 (CUDA 13.0) JIT-compiles PTX up to ISA 9.0; a newer NVRTC
/// emits a newer `.version` that it refuses at load time, on the GPU only.
#[test]
fn the_ptx_is_an_isa_driver_580_loads() {
    if !nvrtc_or_skip() {
        return;
    }
    for source in cuda::SOURCES {
        let ptx = source.compile().unwrap();
        let version = ptx
            .lines()
            .find_map(|l| l.trim().strip_prefix(".version "))
            .unwrap_or_else(|| panic!("{}: no .version line", source.file));
        let (major, minor) = version.trim().split_once('.').unwrap();
        let v = (major.parse::<u32>().unwrap(), minor.parse::<u32>().unwrap());
        assert!(
            v <= (9, 0),
            "{}: PTX ISA {version} is newer than driver 580 loads; use NVRTC 13.0.x",
            source.file
        );
    }
}
