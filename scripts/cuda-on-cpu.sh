#!/usr/bin/env bash
# The CUDA path with no GPU: the GPU suite and the examples' `--device
# cuda` on the CPU CUDA driver of tests/cuda-on-cpu (its libcuda.so,
# libcublas.so, libcurand.so and libcudnn.so run every launch, copy,
# cuBLAS and cuDNN call on the CPU, queued as on a stream). The kernels
# compile with the real NVRTC, installed here from PyPI when it is not
# there yet. CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."

nvrtc_dir="${CARGO_TARGET_DIR:-$PWD/target}/nvrtc"
if [ ! -e "$nvrtc_dir/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$nvrtc_dir" nvidia-cuda-nvrtc==13.0.88
fi
driver="$(cargo run -q -p cuda-on-cpu --bin cpu-driver-dir)"
export LD_LIBRARY_PATH="$driver:$nvrtc_dir/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The driver must open: a case that cannot run fails instead of skipping.
export BLOBFLOW_REQUIRE_GPU=1

# The suite frees everything before it exits: the driver fails it where
# device or pinned memory is still held then (compute-sanitizer's leak
# check). One build (cudnn, dlpack) runs it twice: through cuDNN, then
# with the driver's cuDNN reporting another major version (8.9.7), which
# is refused, so every convolution takes im2col + cuBLAS as on a machine
# without cuDNN (conv::engine_follows_the_library holds the refusal).
# (Each feature set is a build of its own, of the suite and of every
# crate under it: one set serves all but the cuda-only checks below.)
export BLOBFLOW_CPU_CUDA_LEAK_CHECK=1
gpu_features=cudnn,dlpack
cargo test -q --features "$gpu_features" --test gpu
# Without cuDNN the emulated im2col and gemm make the 200 steps of
# train::gpu_tracks_cpu half of the suite's 4 minutes: it ran above,
# where each convolution is one call.
BLOBFLOW_CPU_CUDNN_VERSION=8907 cargo test -q --features "$gpu_features" --test gpu -- --skip train::gpu_tracks_cpu
# Built without the cudnn feature, cuDNN is never looked for.
cargo test -q --features cuda --test gpu -- conv::
# A driver of an older CUDA than NVRTC refuses the kernels' PTX: the error
# names the PTX's ISA, the driver's CUDA and the remedy.
BLOBFLOW_CPU_CUDA_DRIVER_VERSION=12040 cargo test -q --features cuda --test gpu -- kernels::
# Device memory is the driver's malloc, each allocation its exact size:
# under memcheck a kernel launched over more elements than its buffers
# hold fails, with the sizes the layers really launch. LeNet on 10,000
# digits, the training runs and the steady-state counts (LeNet at batch
# 1000) are left to the plain runs: memcheck is some 30 times slower.
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="valgrind -q --error-exitcode=1" \
    cargo test -q --features "$gpu_features" --test gpu -- --skip lenet:: --skip train:: --skip steady_state::
unset BLOBFLOW_CPU_CUDA_LEAK_CHECK

cargo run -q --features cuda --example user_layer -- --device cuda
cargo run -q --features "$gpu_features" --example lenet_mnist -- --device cuda
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cargo run -q --features "$gpu_features" --example train_lenet -- --device cuda --iters 20 --snapshot 10 --out "$out"
cargo run -q --features "$gpu_features" --example train_lenet -- --device cuda --iters 30 --snapshot 0 \
    --resume "$out/lenet_iter_20.solverstate" --out "$out"
# `blobflow train --device cuda` from LMDBs, resuming Caffe's snapshot;
# Caffe's autoencoder and siamese examples on the GPU their solvers name.
cargo test -q -p blobflow-cli --features cuda --test train -- train_on_the_gpu
cargo test -q -p blobflow-cli --features cuda --test examples
# MTCNN's cascade through Net on the GPU, and a net run by the command.
cargo run -q --features "$gpu_features" --example mtcnn -- --device cuda
cargo run -q -p blobflow-cli --features cuda -- run tests/fixtures/nets/mtcnn/det3.prototxt \
    tests/fixtures/nets/mtcnn/det3.caffemodel --input data=tests/fixtures/nets/mtcnn/det3_input.npy --device cuda
# The Python module built with CUDA: LeNet through Net(..., device="cuda").
cargo build -q -p blobflow-python --features cuda
# NumPy 2.1 or later: DLPack's versioned capsules.
python3 -c "import numpy, sys; sys.exit(tuple(map(int, numpy.__version__.split('.')[:2])) < (2, 1))" 2>/dev/null || {
    python3 -m pip install --quiet --disable-pip-version-check --target "$out/numpy" numpy
    export PYTHONPATH="$out/numpy"
}
mkdir -p "$out/module"
cp "${CARGO_TARGET_DIR:-$PWD/target}/debug/libblobflow_python.so" "$out/module/blobflow.abi3.so"
PYTHONPATH="$out/module${PYTHONPATH:+:$PYTHONPATH}" python3 python/tests/test_gpu.py
