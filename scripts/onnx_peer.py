#!/usr/bin/env python3
"""blobflow's Net against ONNX Runtime, OpenVINO, MNN and ncnn (each where
it installs) on the nets of tests/fixtures/nets. ONNX Runtime and
OpenVINO read the ONNX model that `blobflow convert NET.prototxt
WEIGHTS.caffemodel OUT.onnx` writes; ncnn reads what pnnx (ncnn's
converter, its binary from the `pnnx` wheel, weights kept in fp32)
makes of that ONNX model; MNN reads the Caffe files themselves through
its own Caffe converter (the C converter of the `MNN` wheel, `_tools`,
run in a child process: never the `mnnconvert` Python wrapper, which
pip-installs a telemetry package).

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
optimisations; OpenVINO: latency hint, the same threads; MNN: a CPU
session at high precision; ncnn: fp32 storage and arithmetic, batch 1
only, as ncnn runs one image a pass). The two sides
alternate --repeat times; medians and the range of the ratios are
printed. With --layers each net's forward pass is then compared layer by
layer at batch 1: `blobflow time`'s table beside ONNX Runtime's profile
of the same passes (its nodes carry the layers' names) and, where MNN
runs, MNN's ops timed from its session's callbacks (its converter keeps
the Caffe layers' names; a callback's few microseconds are counted in,
and a Convolution's folded residual sum is blobflow's alone), the
largest gaps to the faster peer first. ONNX Runtime chooses its own
instructions (AVX-512 where the CPU has it: on an AVX-512 machine with
BLOBFLOW_CPU=avx2 that
comparison favours it). OpenVINO is held to the same family as
blobflow where BLOBFLOW_CPU=avx2 asks for it (its oneDNN reads
ONEDNN_MAX_CPU_ISA=AVX2, which this script then sets): like with like,
as on a machine without AVX-512.

Needs numpy and onnxruntime (openvino, MNN, ncnn and pnnx optional):
they are installed under target/python-* if pip can; the script says so
and exits 0 where they cannot be had. A peer that cannot read a net, or
whose outputs differ, is named and left out of that net's timing.

Run: python3 scripts/onnx_peer.py [--blobflow target/release/blobflow] [--bench [--layers [--layer-rows N]]] [--threads N] [--repeat N] [--only LABEL] [--peers ort,openvino,mnn,ncnn]
"""
import argparse
import json
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

# The nets the speed issue names, by opencv_peer.py's labels, a net of
# the layers they do not reach (compared, not timed) and ResNet-50's 1x1
# layers alone (timed layer by layer with --layers).
LABELS = [
    "mtcnn det1", "mtcnn det2", "mtcnn det3", "caffenet", "squeezenet v1.1", "googlenet",
    "resnet-50", "mobilenet-ssd", "lenet", "onnx layers (synthetic)",
    "yolov2 darknet19", "yolov2 mobilenet lite", "yolov3 mobilenet lite", "yolov3-tiny", "yolov3",
    "resnet 1x1 layers (synthetic)",
]
CASES = shared.CASES + [("onnx layers (synthetic)", "scripts/peer_nets/onnx_layers.prototxt", None,
                         # Each layer's result is compared, not the last alone.
                         {"outputs": ["lrn_within", "ave", "max_ceil", "deconv", "crop", "prod", "sum",
                                      "power", "norm", "concat", "ip", "softmax", "dw", "reorg",
                                      "unreorg", "up"]}),
                         ("resnet 1x1 layers (synthetic)", "scripts/peer_nets/resnet_1x1.prototxt", None)]
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


def load_mnn():
    """MNN's runtime and the folder holding its C converter (`_tools`), or
    None. --no-deps and no `MNN.tools` import: its Python wrapper
    pip-installs a telemetry package."""
    if not shared.importable(["MNN", "_tools"], "python-mnn", ["MNN"], no_deps=True):
        return None
    import MNN
    import _tools
    return MNN, os.path.dirname(os.path.abspath(_tools.__file__))


def load_ncnn():
    """ncnn's runtime and pnnx's binary, or None (pnnx's Python side needs
    PyTorch; its binary does not)."""
    if not shared.importable(["ncnn"], "python-ncnn", ["ncnn", "pnnx"], no_deps=True):
        return None
    import ncnn
    binary = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(ncnn.__file__))), "pnnx", "pnnx")
    if not os.access(binary, os.X_OK):
        return None
    return ncnn, binary


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


class Mnn:
    name = "MNN"

    def __init__(self, mnn, tools_dir, proto, weights, outputs, threads, work):
        """Converts the Caffe files with MNN's C converter in a child
        process (its output is its own), and opens a CPU session."""
        path = os.path.join(work, "net.mnn")
        if os.path.exists(path):
            os.remove(path)
        convert = ["mnnconvert", "-f", "CAFFE", "--modelFile", weights, "--prototxt", proto,
                   "--MNNModel", path, "--bizCode", "blobflow"]
        code = "import sys; sys.path.insert(0, sys.argv[1]); import _tools; _tools.mnnconvert(sys.argv[2:])"
        r = subprocess.run([sys.executable, "-c", code, tools_dir] + convert, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(path):
            raise RuntimeError(f"MNN's converter failed: {(r.stdout + r.stderr).strip()[-300:]}")
        self.mnn = mnn
        self.np = __import__("numpy")
        self.interpreter = mnn.Interpreter(path)
        self.session = self.interpreter.createSession({"numThread": threads, "backend": "CPU",
                                                       "precision": "high"})
        self.input = self.interpreter.getSessionInput(self.session)
        present = self.interpreter.getSessionOutputAll(self.session)
        missing = [o for o in outputs if o not in present]
        if missing:
            raise RuntimeError(f"MNN's graph has no output {missing} (it has {sorted(present)[:8]})")
        self.outputs = outputs
        self.shape = None

    def run(self, feeds):
        np, mnn, it = self.np, self.mnn, self.interpreter
        x = np.ascontiguousarray(next(iter(feeds.values())), dtype=np.float32)
        if self.shape != x.shape:
            it.resizeTensor(self.input, x.shape)
            it.resizeSession(self.session)
            self.shape = x.shape
        self.input.copyFrom(mnn.Tensor(x.shape, mnn.Halide_Type_Float, x, mnn.Tensor_DimensionType_Caffe))
        it.runSession(self.session)
        result = {}
        for name in self.outputs:
            out = it.getSessionOutput(self.session, name)
            shape = out.getShape()
            host = mnn.Tensor(shape, mnn.Halide_Type_Float, np.zeros(shape, np.float32),
                              mnn.Tensor_DimensionType_Caffe)
            out.copyToHostTensor(host)
            result[name] = np.array(host.getNumpyData()).copy()
        return result

    def layer_times(self, feeds, iters):
        """Each op's mean ms over `iters` passes (after a warm-up), timed
        from MNN's callbacks around it: op -> (type, ms). The callbacks'
        own cost (a few microseconds an op, Python's) is counted in."""
        self.run(feeds)
        started, spent, kinds = [0.0], {}, {}

        def begin(_tensors, op):
            started[0] = time.perf_counter()
            return True

        def end(_tensors, op):
            name = op.getName()
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - started[0]
            kinds[name] = op.getType()
            return True

        for _ in range(max(3, iters // 10)):
            self.interpreter.runSession(self.session)
        for _ in range(iters):
            self.interpreter.runSessionWithCallBackInfo(self.session, begin, end)
        return {name: (kinds[name], spent[name] * 1e3 / iters) for name in spent}


class Ncnn:
    name = "ncnn"

    def __init__(self, ncnn, pnnx, model, shape, outputs, threads):
        """pnnx's ncnn files of the ONNX model (fp32 weights), loaded with
        fp16 and bf16 off. pnnx names the graph's outputs out0, out1, ...
        in the ONNX model's order."""
        r = subprocess.run([pnnx, os.path.basename(model), "inputshape=[" + ",".join(map(str, shape)) + "]",
                            "fp16=0"], cwd=os.path.dirname(model), capture_output=True, text=True)
        stem = os.path.splitext(model)[0]
        if r.returncode != 0 or not os.path.exists(stem + ".ncnn.param"):
            raise RuntimeError(f"pnnx failed: {(r.stdout + r.stderr).strip()[-300:]}")
        self.np = __import__("numpy")
        self.ncnn = ncnn
        self.net = ncnn.Net()
        opt = self.net.opt
        opt.num_threads = threads
        opt.use_fp16_packed = opt.use_fp16_storage = opt.use_fp16_arithmetic = False
        opt.use_bf16_storage = False
        # ncnn faults on a blob its graph lacks: every name is looked for
        # in the param file first.
        with open(stem + ".ncnn.param") as f:
            blobs = set(f.read().split())
        missing = [b for b in ["in0"] + [f"out{i}" for i in range(len(outputs))] if b not in blobs]
        if missing:
            raise RuntimeError(f"pnnx's graph lacks {missing}")
        if self.net.load_param(stem + ".ncnn.param") != 0 or self.net.load_model(stem + ".ncnn.bin") != 0:
            raise RuntimeError("ncnn cannot load pnnx's files")
        self.outputs = outputs

    def run(self, feeds):
        x = next(iter(feeds.values()))
        if x.shape[0] != 1:
            raise ValueError("ncnn runs one image a pass")
        # The Mat reads the array's memory: it stays referenced until extracted.
        image = self.np.ascontiguousarray(x[0], dtype=self.np.float32)
        extractor = self.net.create_extractor()
        extractor.input("in0", self.ncnn.Mat(image))
        result = {}
        for i, name in enumerate(self.outputs):
            _, out = extractor.extract(f"out{i}")
            result[name] = self.np.array(out).copy()
        return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blobflow", help="the blobflow binary (default: cargo run --release)")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", help="the one case to run, by its label")
    ap.add_argument("--repeat", type=int, default=1, help="timings of each side, alternating")
    ap.add_argument("--no-openvino", action="store_true", help="ONNX Runtime alone")
    ap.add_argument("--layer-rows", type=int, default=20,
                    help="with --layers: how many layers to list, the largest gaps first (default 20)")
    ap.add_argument("--layers", action="store_true",
                    help="with --bench: each layer's time, blobflow's beside ONNX Runtime's (its profiler) "
                         "and MNN's (its callbacks), batch 1")
    ap.add_argument("--peers", default="ort,openvino,mnn,ncnn",
                    help="the peers to run, of ort, openvino, mnn, ncnn (ONNX Runtime always checks the export)")
    args = ap.parse_args()
    # The peers' native code writes to the same stream: lines in order.
    sys.stdout.reconfigure(line_buffering=True)
    wanted = set(args.peers.split(","))
    if args.no_openvino:
        wanted.discard("openvino")
    if os.environ.get("BLOBFLOW_CPU", "").lower() == "avx2":
        # Before OpenVINO loads: its oneDNN reads the cap once.
        os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    peers = load_peers("openvino" in wanted)
    if peers is None:
        print("onnx_peer: numpy and onnxruntime cannot be installed here; nothing compared")
        return 0
    np, ort, ov = peers
    mnn = load_mnn() if "mnn" in wanted else None
    ncnn = load_ncnn() if "ncnn" in wanted else None
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    versions = f"ONNX Runtime {ort.__version__}" + (f", OpenVINO {ov.__version__}" if ov else " (OpenVINO not installed)")
    versions += f", MNN {mnn[0].version()}" if mnn else " (MNN not installed)"
    versions += f", ncnn {ncnn[0].__version__} (pnnx from ONNX)" if ncnn else " (ncnn not installed)"
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
            names = sessions[0].outputs
            caffe_net = proto
            if any(f"\"{k}\"" in text for k in shared.DETECTION_OUTPUTS):
                # Every peer's graph ends at the detection output's inputs.
                caffe_net = os.path.join(work, "undetected.prototxt")
                with open(caffe_net, "w") as f:
                    f.write(shared.without_layers(text, shared.DETECTION_OUTPUTS))
            makers = []
            if ov is not None:
                makers.append(("OpenVINO", lambda: OpenVino(ov, model, args.threads)))
            if mnn is not None:
                makers.append(("MNN", lambda: Mnn(mnn[0], mnn[1], caffe_net, saved, names, args.threads,
                                                  work)))
            if ncnn is not None:
                makers.append(("ncnn", lambda: Ncnn(ncnn[0], ncnn[1], model, [1] + shape[1:], names,
                                                    args.threads)))
            for peer_name, make in makers:
                try:
                    sessions.append(make())
                except Exception as e:  # a reader's refusal is reported, not fatal
                    print(f"{label}: {peer_name} cannot read it: {str(e)[:200]}")
            ok = True
            for peer in list(sessions):
                try:
                    outs = peer.run({name: x})
                except Exception as e:
                    print(f"{label}: {peer.name} cannot run it: {str(e)[:200]}")
                    sessions.remove(peer)
                    continue
                worst = 0.0
                for blob, value in outs.items():
                    # `blobflow run` writes blob a/b as a_b.npy.
                    ours = np.load(os.path.join(out_dir, f"{blob.replace('/', '_')}.npy"))
                    value = np.asarray(value).reshape(ours.shape)
                    scale = max(float(np.abs(ours).max()), 1e-30)
                    worst = max(worst, float(np.abs(value - ours).max()) / scale)
                agrees = worst <= 1e-5
                print(f"{label}: {peer.name} {'agrees' if agrees else 'DIFFERS'}: {len(outs)} output(s), "
                      f"largest difference {worst:.1e} of the blob's magnitude")
                if isinstance(peer, Ort):
                    # The export itself is what ONNX Runtime checks.
                    ok &= agrees
                elif not agrees:
                    sessions.remove(peer)
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
                if args.layers:
                    mnn_session = next((p for p in sessions if isinstance(p, Mnn)), None)
                    layer_table(np, ort, cmd, env, label, (timed, saved), model, name, text, args.threads, work,
                                mnn_session, args.layer_rows, args.repeat)
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
        # ncnn runs one image a pass: at a larger batch it sits out.
        peers = [p for p in sessions if batch == 1 or not isinstance(p, Ncnn)]
        for peer in peers:
            peer.run({name: x})
        ours_all, theirs_all = [], {p.name: [] for p in peers}
        for _ in range(max(1, repeat)):
            time.sleep(0.3)
            ms = blobflow_ms(iters)
            if ms is None:
                break
            ours_all.append(batch / (ms / 1e3))
            for peer in peers:
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


def blobflow_layers(stdout):
    """`blobflow time`'s table: layer -> (type, forward ms, the layer it
    is folded into or None)."""
    rows = {}
    for line in stdout.splitlines():
        m = re.match(r"^(\S+)\s+(\S+)\s+([0-9.]+)\s+[0-9.]+(?:\s+\(forward folded into (\S+)\))?\s*$", line)
        if m:
            rows[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4))
    return rows


def ort_layers(ort, model, feeds, threads, iters, work):
    """ONNX Runtime's profile of `iters` passes: node -> (op, mean ms),
    its nodes named as blobflow's export named them (the NCHWc
    transform's copies carry a `_nchwc` suffix, taken off)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(work, "ort-profile")
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    for _ in range(max(3, iters // 10) + iters):
        session.run(None, feeds)
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    times, kinds = {}, {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        node = e["name"][: -len("_kernel_time")]
        node = node[: -len("_nchwc")] if node.endswith("_nchwc") else node
        times.setdefault(node, []).append(e["dur"] / 1e3)
        kinds[node] = e.get("args", {}).get("op_name", "?")
    # The profile lists the passes in order: the last `iters` of each
    # node are the timed ones, the warm-up's before them.
    return {n: (kinds[n], sum(t[-iters:]) / len(t[-iters:])) for n, t in times.items()}


def layer_table(np, ort, cmd, env, label, ours, model, name, text, threads, work, mnn=None, rows_shown=20,
                repeat=1):
    """Each layer's forward time at batch 1: blobflow's (`blobflow time`,
    layers folded into another counted with it) beside ONNX Runtime's
    nodes of the same name and, where `mnn` is a session, MNN's ops of
    the same name (speed: the peer's time over blobflow's, as the
    images/s ratios), the largest gaps to the faster peer first, and
    what no side names alike (layout reorders, fused nodes, blobflow's
    layers the export leaves out) in totals. With `repeat` rounds, the
    sides take turns and each layer's time is its fastest round's: a
    neighbour's burst on a shared machine slows one round, not all."""
    proto, weights = ours
    _, declared = shared.declared_input(np, text)
    iters = 50
    feeds = {name: np.zeros([1] + declared[1:], dtype=np.float32)}
    ours_rows, peers = {}, {"ONNX Runtime": {}}
    if mnn is not None:
        peers["MNN"] = {}

    def fastest(into, times):
        for layer, (kind, ms, *rest) in times.items():
            if layer not in into or ms < into[layer][1]:
                into[layer] = (kind, ms, *rest)

    for _ in range(max(1, repeat)):
        r = subprocess.run(cmd + ["time", proto, "--weights", weights, "--iterations", str(iters), "--batch", "1",
                                  "--reuse-memory"], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"  {label} layers: blobflow time failed: {r.stderr.strip()[-200:]}")
            return
        fastest(ours_rows, blobflow_layers(r.stdout))
        fastest(peers["ONNX Runtime"], ort_layers(ort, model, feeds, threads, iters, work))
        if mnn is not None:
            fastest(peers["MNN"], mnn.layer_times(feeds, iters))
    rows, ours_only = [], 0.0
    for layer, (kind, ms, into) in ours_rows.items():
        theirs = [times[layer][1] if layer in times else None for times in peers.values()]
        if any(t is not None for t in theirs):
            rows.append((layer, kind, ms, theirs))
        elif into is None:
            ours_only += ms
    rows.sort(key=lambda row: min(t for t in row[3] if t is not None) - row[2])
    head = "".join(f" {peer:>13} {'speed':>6}" for peer in peers)
    rounds = f", the fastest of {repeat} alternating rounds" if repeat > 1 else ""
    print(f"  {label} layer by layer (batch 1, {threads} thread(s), ms a pass{rounds}, the largest gaps first):")
    print(f"    {'layer':<32} {'type':<14} {'blobflow':>9}{head}")
    for layer, kind, ms, theirs in rows[:rows_shown]:
        cells = ""
        for t in theirs:
            ratio = f"{t / ms:.2f}x" if t is not None and ms > 0 else "-"
            cells += f" {t:>13.3f} {ratio:>6}" if t is not None else f" {'-':>13} {ratio:>6}"
        print(f"    {layer:<32} {kind:<14} {ms:>9.3f}{cells}")
    for i, (peer, times) in enumerate(peers.items()):
        named = [(row[2], row[3][i]) for row in rows if row[3][i] is not None]
        others = sum(ms for node, (_, ms) in times.items() if node not in ours_rows)
        print(f"    {len(named)} layers blobflow and {peer} both name: blobflow {sum(o for o, _ in named):.2f} ms, "
              f"{peer} {sum(t for _, t in named):.2f} ms; {peer}'s others (reorders, fused nodes) {others:.2f} ms")
    print(f"    blobflow's layers no peer names: {ours_only:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
