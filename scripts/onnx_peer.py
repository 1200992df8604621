#!/usr/bin/env python3
"""blobflow's Net against ONNX Runtime (and OpenVINO where it installs) on
the nets of tests/fixtures/nets, each peer reading the ONNX model that
`blobflow convert NET.prototxt WEIGHTS.caffemodel OUT.onnx` writes.

For each net: blobflow runs the prototxt on a random input (weights as
opencv_peer.py takes them: the trained ones where the repository has
them, else random ones that `blobflow run --fill 1701 --save` drew), the
same net is exported to ONNX, and each peer's outputs must agree with
blobflow's within 1e-5 of the blob's largest magnitude. SSD nets are
exported up to their DetectionOutput (`--outputs` its bottoms), which
ONNX cannot express, and the YOLO forks' nets up to their detection
outputs likewise.

With --bench it then times the forward pass of each net that agrees, at
batch 1 and at the declared batch, on --threads threads: blobflow
through `blobflow time` (net alone, inputs all zeros, without the
detection output the peers' graphs stop before; it prints which
CPU kernels ran: set BLOBFLOW_CPU=avx2 to hold blobflow to its AVX2
path), each peer through its own session on the same zeros (ONNX
Runtime: intra-op threads, sequential execution, all graph
optimisations; OpenVINO: latency hint, the same threads). The two sides
alternate --repeat times; medians and the range of the ratios are
printed. ONNX Runtime chooses its own instructions (AVX-512 where the
CPU has it: on an AVX-512 machine with BLOBFLOW_CPU=avx2 that
comparison favours it). OpenVINO is held to the same family as
blobflow where BLOBFLOW_CPU=avx2 asks for it (its oneDNN reads
ONEDNN_MAX_CPU_ISA=AVX2, which this script then sets): like with like,
as on a machine without AVX-512.

Needs numpy and onnxruntime (and openvino, optional): they are installed
under target/python-onnx if pip can; the script says so and exits 0
where they cannot be had.

Run: python3 scripts/onnx_peer.py [--blobflow target/release/blobflow] [--bench] [--threads N] [--repeat N] [--only LABEL]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import opencv_peer as shared  # noqa: E402

ROOT = shared.ROOT

# The nets the speed issue names, by opencv_peer.py's labels, and a net
# of the layers they do not reach (compared, not timed).
LABELS = [
    "mtcnn det1", "mtcnn det2", "mtcnn det3", "caffenet", "squeezenet v1.1", "googlenet",
    "resnet-50", "mobilenet-ssd", "lenet", "onnx layers (synthetic)",
    "yolov2 darknet19", "yolov2 mobilenet lite", "yolov3 mobilenet lite", "yolov3-tiny", "yolov3",
]
CASES = shared.CASES + [("onnx layers (synthetic)", "scripts/peer_nets/onnx_layers.prototxt", None,
                         # Each layer's result is compared, not the last alone.
                         {"outputs": ["lrn_within", "ave", "max_ceil", "deconv", "crop", "prod", "sum",
                                      "power", "norm", "concat", "ip", "softmax", "dw", "reorg",
                                      "unreorg", "up"]})]
UNTIMED = {"onnx layers (synthetic)"}


def load_peers(with_openvino):
    """numpy, onnxruntime and (or None) openvino, installed under target/
    where missing."""
    if not shared.importable(["onnxruntime", "numpy"], "python-onnx", ["onnxruntime", "numpy"]):
        return None
    import numpy
    import onnxruntime
    # --no-deps: OpenVINO's runtime alone, without the telemetry package
    # the conversion tools pull in (numpy comes from above).
    if not with_openvino or not shared.importable(["openvino"], "python-openvino", ["openvino"], no_deps=True):
        return numpy, onnxruntime, None
    import openvino
    return numpy, onnxruntime, openvino


class Ort:
    name = "ONNX Runtime"

    def __init__(self, ort, path, threads):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]

    def run(self, feeds):
        return dict(zip(self.outputs, self.session.run(None, feeds)))


class OpenVino:
    name = "OpenVINO"

    def __init__(self, ov, path, threads):
        core = ov.Core()
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                  "INFERENCE_PRECISION_HINT": "f32"})
        model = core.read_model(path)
        self.model = model
        self.core = core
        self.compiled = {}
        self.outputs = [o.get_any_name() for o in model.outputs]

    def run(self, feeds):
        shape = tuple(next(iter(feeds.values())).shape)
        if shape not in self.compiled:
            m = self.model.clone()
            m.reshape({k: list(v.shape) for k, v in feeds.items()})
            self.compiled[shape] = self.core.compile_model(m, "CPU").create_infer_request()
        request = self.compiled[shape]
        result = request.infer(feeds)
        return {name: result[i] for i, name in enumerate(self.outputs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blobflow", help="the blobflow binary (default: cargo run --release)")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", help="the one case to run, by its label")
    ap.add_argument("--repeat", type=int, default=1, help="timings of each side, alternating")
    ap.add_argument("--no-openvino", action="store_true", help="ONNX Runtime alone")
    args = ap.parse_args()
    if os.environ.get("BLOBFLOW_CPU", "").lower() == "avx2":
        # Before OpenVINO loads: its oneDNN reads the cap once.
        os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    peers = load_peers(not args.no_openvino)
    if peers is None:
        print("onnx_peer: numpy and onnxruntime cannot be installed here; nothing compared")
        return 0
    np, ort, ov = peers
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    versions = f"ONNX Runtime {ort.__version__}" + (f", OpenVINO {ov.__version__}" if ov else " (OpenVINO not installed)")
    print(f"{versions}, numpy {np.__version__}, {args.threads} thread(s) each; "
          f"BLOBFLOW_CPU={os.environ.get('BLOBFLOW_CPU', '(unset: the widest)')}; "
          f"OpenVINO's ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset: the widest)')}; "
          "ONNX Runtime on its widest")
    cmd = shared.blobflow_cmd(args.blobflow)
    work = tempfile.mkdtemp(prefix="onnx-peer-")
    failed, compared = 0, 0
    try:
        for label, proto_rel, weights_rel, *rest in CASES:
            if label not in LABELS or (args.only and args.only != label):
                continue
            proto = shared.located(proto_rel)
            text = open(proto).read()
            name, shape = shared.declared_input(np, text)
            # Values of both signs, so that every branch (PReLU, ELU,
            # LeakyReLU) is taken.
            x = (np.random.RandomState(0).rand(*([1] + shape[1:])) - 0.5).astype(np.float32)
            xin = os.path.join(work, "input.npy")
            np.save(xin, x)
            out_dir = os.path.join(work, "out")
            shutil.rmtree(out_dir, ignore_errors=True)
            saved = os.path.join(work, "weights.caffemodel")
            weights = [shared.located(weights_rel)] if weights_rel else ["--fill", "1701"]
            r = subprocess.run(cmd + ["run", proto] + weights + ["--input", f"{name}={xin}", "--out", out_dir,
                                                                  "--save", saved, "--all-blobs"],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(f"{label}: FAILED: blobflow run: {r.stderr.strip()[-300:]}")
                failed += 1
                continue
            model = os.path.join(work, "net.onnx")
            convert = cmd + ["convert", proto, saved, model]
            options = rest[0] if rest else {}
            for bottoms in shared.detection_layers(text):
                convert += ["--outputs", ",".join(bottoms)]
            for _, bottoms, _, _ in shared.yolo_layers(text):
                convert += ["--outputs", ",".join(bottoms)]
            if "outputs" in options:
                convert += ["--outputs", ",".join(options["outputs"])]
            r = subprocess.run(convert, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(f"{label}: FAILED: blobflow convert: {r.stderr.strip()[-300:]}")
                failed += 1
                continue
            sessions = [Ort(ort, model, args.threads)]
            if ov is not None:
                try:
                    sessions.append(OpenVino(ov, model, args.threads))
                except Exception as e:  # a reader's refusal is reported, not fatal
                    print(f"{label}: OpenVINO cannot read it: {str(e)[:200]}")
            ok = True
            for peer in sessions:
                outs = peer.run({name: x})
                worst = 0.0
                for blob, value in outs.items():
                    # `blobflow run` writes blob a/b as a_b.npy.
                    ours = np.load(os.path.join(out_dir, f"{blob.replace('/', '_')}.npy"))
                    value = np.asarray(value).reshape(ours.shape)
                    scale = max(float(np.abs(ours).max()), 1e-30)
                    worst = max(worst, float(np.abs(value - ours).max()) / scale)
                agrees = worst <= 1e-5
                ok &= agrees
                print(f"{label}: {peer.name} {'agrees' if agrees else 'DIFFERS'}: {len(outs)} output(s), "
                      f"largest difference {worst:.1e} of the blob's magnitude")
            compared += 1
            if not ok:
                failed += 1
                continue
            if args.bench and label not in UNTIMED:
                timed = proto
                if any(f"\"{k}\"" in text for k in shared.DETECTION_OUTPUTS):
                    # The peers' graphs end at the detection output's
                    # inputs: blobflow is timed on the same layers.
                    timed = os.path.join(work, "timed.prototxt")
                    with open(timed, "w") as f:
                        f.write(shared.without_layers(text, shared.DETECTION_OUTPUTS))
                bench(np, cmd, env, label, (timed, saved), sessions, name, text, args.threads, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{compared} nets compared, {failed} failed")
    return 1 if failed else 0


def bench(np, cmd, env, label, ours, sessions, name, text, threads, repeat):
    """Forward images/s, blobflow against each peer, batch 1 and the
    declared batch, zeros in, alternating `repeat` times."""
    proto, weights = ours
    _, declared = shared.declared_input(np, text)
    for batch in sorted({1, declared[0]}):
        path = [None]

        def blobflow_ms(iters):
            # --reuse-memory: intermediate blobs share memory, as the
            # peers' arenas do; only the outputs are kept.
            r = subprocess.run(cmd + ["time", proto, "--weights", weights, "--iterations", str(iters),
                                      "--batch", str(batch), "--reuse-memory"],
                               capture_output=True, text=True, env=env)
            m = re.search(r"Average Forward pass: ([0-9.]+) ms", r.stdout)
            p = re.search(r"^cpu: (\S+)", r.stdout, re.M)
            if p:
                path[0] = p.group(1)
            if r.returncode != 0 or m is None:
                print(f"  {label} batch {batch}: blobflow time failed: {r.stderr.strip()[-200:]}")
                return None
            return float(m.group(1))

        guess = blobflow_ms(3)
        if guess is None:
            continue
        iters = int(min(5000, max(3, 1000.0 / max(guess, 1e-3))))
        x = np.zeros([batch] + declared[1:], dtype=np.float32)
        for peer in sessions:
            peer.run({name: x})
        ours_all, theirs_all = [], {p.name: [] for p in sessions}
        for _ in range(max(1, repeat)):
            time.sleep(0.3)
            ms = blobflow_ms(iters)
            if ms is None:
                break
            ours_all.append(batch / (ms / 1e3))
            for peer in sessions:
                t = time.perf_counter()
                for _ in range(iters):
                    peer.run({name: x})
                theirs_all[peer.name].append(batch * iters / (time.perf_counter() - t))
        if not ours_all:
            continue
        ours = shared.median(ours_all)
        parts = []
        for peer, rates in theirs_all.items():
            theirs = shared.median(rates)
            ratios = [a / b for a, b in zip(ours_all, rates)]
            spread = f" ({min(ratios):.2f}x-{max(ratios):.2f}x)" if len(ratios) > 1 else ""
            parts.append(f"{peer} {theirs:.1f} images/s, ratio {ours / theirs:.2f}x{spread}")
        print(f"  {label} batch {batch} ({threads} thread(s), forward, zeros, blobflow on {path[0]}, reusing memory): "
              f"blobflow {ours:.1f} images/s; " + "; ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
