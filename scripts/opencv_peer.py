#!/usr/bin/env python3
"""blobflow's Net against OpenCV 4.x's dnn module (its own Caffe importer)
on every net of tests/fixtures/nets: the same prototxt, the same weights
(the trained ones where the repository has them, else random ones that
`blobflow run --fill SEED --save` drew and wrote: deploy prototxts carry
no fillers, so Caffe's would be all zeros), the same random
input; every output, and the scores each final Softmax reads (with
fillers' weights the probabilities alone are nearly uniform), must agree
within 1e-4 of the blob's largest magnitude. A net blobflow
cannot build yet is reported as skipped, with blobflow's reason.

SSD nets end in DetectionOutput, whose rows the two order differently:
there its inputs (decoded boxes' offsets, scores, prior boxes) are held
to the same 1e-4, the detections are compared as sets (the same image,
label and score for each row; the same box where no other row of its
label has that score: tied scores may keep different boxes), and the
confidence threshold is lowered to 0.02 in a copy of the prototxt, as
random weights score every class near 1/21.

With --bench it also times the forward pass of each net that agrees, at
batch 1 and at the declared batch, both on the same number of threads
(--threads, default 1): blobflow through `blobflow time` (net alone,
inputs all zeros), OpenCV through net.forward() on the same zeros, and
prints images/s and blobflow's ratio, and each side's GFLOP/s (the
convolutions' and inner products' multiply-adds) as a share of the
machine's multiply-add peak on those threads, which `blobflow time`
measures after its passes. With --repeat N the two are timed
N times, one after the other, and the medians are printed with the
range of the N ratios (a VM's neighbours move single runs by 10% and
more).

Needs numpy and opencv-python-headless<5 (5.0 dropped the Caffe
importer): it installs them under target/python-opencv if pip can, and
says so and exits 0 where they cannot be had.

Run: python3 scripts/opencv_peer.py [--blobflow target/release/blobflow] [--bench] [--threads N] [--repeat N] [--only LABEL]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETS = os.path.join(ROOT, "tests", "fixtures", "nets")

# (label, prototxt, trained weights or None)
CASES = [
    ("mtcnn det1", "mtcnn/det1.prototxt", "mtcnn/det1.caffemodel"),
    ("mtcnn det2", "mtcnn/det2.prototxt", "mtcnn/det2.caffemodel"),
    ("mtcnn det3", "mtcnn/det3.prototxt", "mtcnn/det3.caffemodel"),
    ("caffenet", "bvlc_reference_caffenet/deploy.prototxt", None),
    ("squeezenet v1.1", "squeezenet_v1.1/deploy.prototxt", None),
    ("googlenet", "bvlc_googlenet/deploy.prototxt", None),
    ("resnet-50", "resnet50/ResNet-50-deploy.prototxt", None),
    ("mobilenet-ssd", "mobilenet_ssd/MobileNetSSD_deploy.prototxt", None),
    ("mobilenet-ssd unfolded", "mobilenet_ssd/deploy.prototxt", None),
    # Relative to the repository: LeNet as the examples run it, and a net
    # of the convolution geometries.
    ("lenet", "models/lenet/lenet.prototxt", "models/lenet/lenet_iter_10000.caffemodel"),
    ("conv geometry (synthetic)", "scripts/peer_nets/geometry.prototxt", None),
]


def located(rel):
    """A case's file: under the repository for its own nets, else among
    the fixtures' nets."""
    own = rel.startswith("scripts/") or rel.startswith("models/")
    return os.path.join(ROOT if own else NETS, rel)


def load_peer():
    """numpy and cv2, installed under target/ where missing."""
    try:
        import cv2  # noqa: F401
        import numpy  # noqa: F401
    except ImportError:
        site = os.path.join(ROOT, "target", "python-opencv")
        if not os.path.isdir(os.path.join(site, "cv2")):
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   "--target", site, "opencv-python-headless<5", "numpy"]
            if subprocess.run(pip).returncode != 0:
                return None
        sys.path.insert(0, site)
    try:
        import cv2
        import numpy
    except ImportError:
        return None
    return cv2, numpy


def blobflow_cmd(given):
    if given:
        return [given]
    return ["cargo", "run", "-q", "--release", "-p", "blobflow-cli", "--"]


def declared_input(np, text):
    """The first input's name and shape as the prototxt declares it."""
    m = re.search(r'input:\s*"([^"]+)"', text)
    dims = [int(d) for d in re.findall(r"input_dim:\s*(\d+)", text)[:4]]
    if m and dims:
        return m.group(1), dims
    m2 = re.search(r"input_shape\s*:?\s*{([^}]*)}", text)
    if m and m2:
        return m.group(1), [int(d) for d in re.findall(r"dim:\s*(\d+)", m2.group(1))]
    m = re.search(r'type:\s*"Input"[^{}]*?top:\s*"([^"]+)"[^{}]*?input_param\s*:?\s*{\s*shape\s*:?\s*{([^}]*)}', text, re.S)
    if m:
        return m.group(1), [int(d) for d in re.findall(r"dim:\s*(\d+)", m.group(2))]
    return None, None


def detection_layers(text):
    """(bottoms) of each DetectionOutput layer."""
    found = []
    for layer in re.findall(r"layers?\s*{(.*?)\n}", text, re.S):
        if re.search(r'type:\s*"DetectionOutput"', layer):
            found.append(re.findall(r'bottom:\s*"([^"]+)"', layer))
    return found


def compare_detections(np, ours, theirs):
    """The largest difference between two sets of detection rows, or None
    where they differ in count, image or label."""
    ours, theirs = ours.reshape(-1, 7), np.asarray(theirs).reshape(-1, 7)
    if ours.shape != theirs.shape:
        return None
    by_score = lambda a: a[np.lexsort((-a[:, 2], a[:, 1], a[:, 0]))]
    a, b = by_score(ours), by_score(theirs)
    if not (np.array_equal(a[:, :2], b[:, :2])):
        return None
    worst = float(np.max(np.abs(a[:, 2] - b[:, 2]), initial=0.0))

    def untied(rows):
        keep = [r for r in rows if np.sum((rows[:, 0] == r[0]) & (rows[:, 1] == r[1])
                                          & (np.abs(rows[:, 2] - r[2]) <= 1e-5)) == 1]
        return by_score(np.array(keep).reshape(-1, 7))

    ua, ub = untied(a), untied(b)
    if ua.shape != ub.shape:
        return None
    return max(worst, float(np.max(np.abs(ua - ub), initial=0.0)))


def softmax_inputs(text):
    """The bottoms of the net's Softmax layers."""
    found = []
    for layer in re.findall(r"layers?\s*{(.*?)\n}", text, re.S):
        if re.search(r'type:\s*"Softmax"', layer):
            m = re.search(r'bottom:\s*"([^"]+)"', layer)
            if m:
                found.append(m.group(1))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blobflow", help="the blobflow binary (default: cargo run --release)")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", help="the one case to run, by its label")
    ap.add_argument("--repeat", type=int, default=1, help="timings of each side, alternating")
    args = ap.parse_args()
    peer = load_peer()
    if peer is None:
        print("opencv_peer: numpy and opencv-python-headless<5 cannot be installed here; nothing compared")
        return 0
    cv2, np = peer
    cv2.setNumThreads(args.threads)
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    print(f"OpenCV {cv2.__version__}, numpy {np.__version__}, {args.threads} thread(s) each")
    cmd = blobflow_cmd(args.blobflow)
    work = tempfile.mkdtemp(prefix="opencv-peer-")
    failed, compared, skipped = 0, 0, 0
    try:
        for label, proto_rel, weights_rel in CASES:
            if args.only and args.only != label:
                continue
            proto = located(proto_rel)
            text = open(proto).read()
            detections = detection_layers(text)
            if detections:
                text = re.sub(r"confidence_threshold:\s*[0-9.eE+-]+", "confidence_threshold: 0.02", text)
                proto = os.path.join(work, "ssd.prototxt")
                with open(proto, "w") as f:
                    f.write(text)
            name, shape = declared_input(np, text)
            if name is None:
                print(f"{label}: skipped: no input declared")
                skipped += 1
                continue
            shape = [1] + shape[1:]
            x = np.random.RandomState(0).rand(*shape).astype(np.float32)
            xin = os.path.join(work, "input.npy")
            np.save(xin, x)
            out_dir = os.path.join(work, "out")
            shutil.rmtree(out_dir, ignore_errors=True)
            saved = os.path.join(work, "weights.caffemodel")
            weights = [located(weights_rel)] if weights_rel else ["--fill", "1701"]
            run = cmd + ["run", proto] + weights + [
                "--input", f"{name}={xin}", "--out", out_dir, "--save", saved, "--all-blobs"]
            r = subprocess.run(run, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                reason = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
                print(f"{label}: skipped: blobflow cannot run it yet: {reason}")
                skipped += 1
                continue
            net = cv2.dnn.readNetFromCaffe(proto, saved)
            net.setInput(x, name)
            outs = list(net.getUnconnectedOutLayersNames())
            scores = [b for b in softmax_inputs(text) if b not in outs and b in net.getLayerNames()]
            feeds = [b for d in detections for b in d[:3] if b in net.getLayerNames()]
            # A prototxt may name more blobs to compare: "# compare: a b".
            named = re.search(r"^# compare:(.*)$", text, re.M)
            feeds += [b for b in (named.group(1).split() if named else [])
                      if b in net.getLayerNames() and b not in outs + scores + feeds]
            got = net.forward(outs + scores + feeds)
            worst = 0.0
            for out_name, theirs in zip(outs + scores + feeds, got):
                ours = np.load(os.path.join(out_dir, out_name.replace("/", "_") + ".npy"))
                if detections and out_name in outs:
                    diff = compare_detections(np, ours, theirs)
                    if diff is None:
                        print(f"{label}: {out_name}: the detections differ in count, image or label")
                        diff = float("inf")
                    worst = max(worst, diff)
                    rows = ours.reshape(-1, 7)
                    found = int(np.sum(rows[:, 1] >= 0))
                    print(f"{label}: {out_name}: {found} detections, {len(rows) - found} empty rows")
                    continue
                theirs = np.asarray(theirs).reshape(ours.shape)
                scale = max(float(np.max(np.abs(theirs))), 1e-30)
                worst = max(worst, float(np.max(np.abs(ours - theirs))) / scale)
            ok = worst <= 1e-4
            compared += 1
            failed += not ok
            print(f"{label}: {'agrees' if ok else 'DIFFERS'}: {', '.join(outs + scores + feeds)} within {worst:.2e} of their scale")
            if args.bench and ok:
                bench(cv2, np, cmd, env, label, proto, saved, name, text, args.threads, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{compared} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def bench(cv2, np, cmd, env, label, proto, weights, name, text, threads, repeat):
    """Forward images/s, blobflow against OpenCV, at batch 1 and the
    declared batch, inputs zeros, net alone; `repeat` timings of each,
    alternating, their medians and the range of the ratios."""
    _, declared = declared_input(np, text)
    for batch in sorted({1, declared[0]}):
        def blobflow_ms(iters):
            r = subprocess.run(cmd + ["time", proto, "--weights", weights, "--iterations", str(iters),
                                      "--batch", str(batch)], capture_output=True, text=True, env=env)
            m = re.search(r"Average Forward pass: ([0-9.]+) ms", r.stdout)
            if r.returncode != 0 or m is None:
                print(f"  {label} batch {batch}: blobflow time failed: {r.stderr.strip()[-200:]}")
                return None
            g = re.search(r"Forward: ([0-9.]+) GFLOP a pass", r.stdout)
            gflop[0] = float(g.group(1)) if g else None
            p = re.search(r"multiply-add peak, measured now: ([0-9.]+) GFLOP/s", r.stdout)
            if p:
                peaks.append(float(p.group(1)))
            return float(m.group(1))
        gflop = [None]
        # The machine's multiply-add peak on these threads, as each
        # `blobflow time` measured it after its passes.
        peaks = []
        # About a second of passes each (a tiny net needs thousands to be
        # timed at all), after a short run that says how long one takes.
        # OpenCV's threads spin for a while after the last net it ran, in
        # this process: let them go idle before blobflow's run.
        time.sleep(0.5)
        guess = blobflow_ms(3)
        if guess is None:
            continue
        iters = int(min(5000, max(3, 1000.0 / max(guess, 1e-3))))
        net = cv2.dnn.readNetFromCaffe(proto, weights)
        x = np.zeros([batch] + declared[1:], dtype=np.float32)
        net.setInput(x, name)
        net.forward()
        ours_all, theirs_all = [], []
        for _ in range(max(1, repeat)):
            time.sleep(0.5)
            ms = blobflow_ms(iters)
            if ms is None:
                break
            ours_all.append(batch / (ms / 1e3))
            t = time.perf_counter()
            for _ in range(iters):
                net.setInput(x, name)
                net.forward()
            theirs_all.append(batch * iters / (time.perf_counter() - t))
        if not ours_all:
            continue
        ours, theirs = median(ours_all), median(theirs_all)
        rates = ""
        if gflop[0]:
            # The same multiply-adds (convolutions, inner products) per pass.
            per_image = gflop[0] / batch
            rates = f" ({ours * per_image:.1f} vs {theirs * per_image:.1f} GFLOP/s"
            if peaks:
                peak = median(peaks)
                rates += (f"; {100 * ours * per_image / peak:.0f}% vs {100 * theirs * per_image / peak:.0f}%"
                          f" of the {peak:.0f} GFLOP/s peak")
            rates += ")"
        spread = ""
        if len(ours_all) > 1:
            ratios = [a / b for a, b in zip(ours_all, theirs_all)]
            spread = f", {len(ratios)} runs {min(ratios):.2f}x-{max(ratios):.2f}x"
        what = "median " if len(ours_all) > 1 else ""
        print(f"  {label} batch {batch} ({threads} thread(s), forward, zeros): blobflow {ours:.1f} images/s, "
              f"OpenCV {theirs:.1f} images/s, {what}ratio {ours / theirs:.2f}x{spread}{rates}")


def median(values):
    """The middle value (the mean of the two middle ones)."""
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


if __name__ == "__main__":
    sys.exit(main())
