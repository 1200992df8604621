//! Every layer's `.cu` source compiles with NVRTC, and its PTX defines
//! exactly the kernels its launchers call, with the parameter types they
//! push. Needs no GPU, only libnvrtc; without it the test fails rather
//! than pass without compiling anything, unless BLOBFLOW_SKIP_NVRTC says
//! why.
#![cfg(feature = "cuda")]

use blob_kernels::cuda;

#[test]
fn every_layer_launcher_matches_its_kernel_in_the_ptx() {
    if !cuda::nvrtc_available() {
        let why = std::env::var("BLOBFLOW_SKIP_NVRTC").unwrap_or_else(|_| {
            panic!("NVRTC could not be loaded: install nvidia-cuda-nvrtc==13.0.88 and add its lib directory to LD_LIBRARY_PATH")
        });
        eprintln!("skipped: NVRTC not loadable ({why})");
        return;
    }
    let mut files = Vec::new();
    for source in blob_layers::KERNEL_SOURCES {
        let ptx = source.compile().unwrap_or_else(|e| panic!("{e}"));
        source.check_ptx(&ptx).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cuda::ptx_entries(&ptx).len(),
            source.sigs().count(),
            "{}: one launcher per kernel",
            source.file
        );
        files.push(source.file);
    }
    assert_eq!(
        files,
        [
            "conv.cu",
            "pool.cu",
            "activation.cu",
            "inner_product.cu",
            "softmax.cu",
            "dropout.cu",
            "prelu.cu",
            "lrn.cu",
            "eltwise.cu",
            "concat.cu",
            "scale.cu",
            "batch_norm.cu",
            "solver.cu",
            "permute.cu",
            "neuron.cu",
            "normalize.cu",
            "argmax.cu",
            "shuffle_channel.cu",
            "upsample.cu",
            "axpy.cu",
            "bn.cu",
            "interp.cu",
            "loss.cu",
            "reorg.cu",
            "tile.cu",
            "reduction.cu",
            "mvn.cu",
            "embed.cu",
            "batch_reindex.cu",
            "lstm_unit.cu",
            "recurrent.cu",
        ]
    );
}
