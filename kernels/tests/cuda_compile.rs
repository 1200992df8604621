//! Every `.cu` kernel source compiles with NVRTC. Needs no GPU, only
//! libnvrtc (CI installs the `nvidia-cuda-nvrtc` wheel and points
//! LD_LIBRARY_PATH at it); without NVRTC the test fails rather than pass
//! without compiling anything, unless BLOBFLOW_SKIP_NVRTC says why.
#![cfg(feature = "cuda")]

#[test]
fn every_kernel_source_compiles_with_nvrtc() {
    if !blob_kernels::cuda::nvrtc_available() {
        if let Ok(why) = std::env::var("BLOBFLOW_SKIP_NVRTC") {
            eprintln!("skipped: NVRTC not loadable ({why})");
            return;
        }
        panic!(
            "NVRTC could not be loaded: install nvidia-cuda-nvrtc==13.0.88 and add its lib directory to LD_LIBRARY_PATH"
        );
    }
    let ptx = blob_kernels::cuda::compile_sources().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ptx.len(), blob_kernels::cuda::SOURCES.len());
    for (file, p) in &ptx {
        let text = p.to_src();
        assert!(text.contains(".entry"), "{file}: no kernels in the PTX");
    }
}
