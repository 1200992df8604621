#!/usr/bin/env python3
"""The public deploy nets of tests/fixtures/nets on the GPU against the CPU,
through the `blobflow` command, then timed on the GPU.

For each net, at its declared input size and at another one: the same
random weights (`blobflow run --fill 3`), the same random input (an .npy
drawn here), one forward pass on the CPU and one with `--device cuda`,
every blob of the net written out (`--all-blobs`) and compared: each
within 1e-4 of the CPU blob's largest magnitude. DetectionOutput's rows
are compared as sorted sets and only reported (random weights score
every class near 1/21, so ties at the keep_top_k boundary may keep other
rows); its inputs are held to the 1e-4 like every other blob.

Then `blobflow time --device cuda` at batch 1 and at the declared batch:
the net alone, inputs all zeros, Caffe's `caffe time` (every layer
waited for, so small layers' launch latency counts).

Needs numpy (the GPU machine's python3 has it); says so and exits 0
without it. Run from scripts/gpu-check.sh, or by hand:

    python3 scripts/gpu_nets.py BLOBFLOW NETS_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

# (label, prototxt under NETS_DIR, declared input, another input size).
# GoogLeNet and ResNet-50 end in a fixed 7 x 7 pool and an inner product:
# only their batch can change.
CASES = [
    ("caffenet", "bvlc_reference_caffenet/deploy.prototxt", (10, 3, 227, 227), (1, 3, 227, 227)),
    ("squeezenet v1.1", "squeezenet_v1.1/deploy.prototxt", (1, 3, 227, 227), (1, 3, 227, 303)),
    ("googlenet", "bvlc_googlenet/deploy.prototxt", (10, 3, 224, 224), (1, 3, 224, 224)),
    ("resnet-50", "resnet50/ResNet-50-deploy.prototxt", (1, 3, 224, 224), (4, 3, 224, 224)),
    ("mobilenet-ssd", "mobilenet_ssd/MobileNetSSD_deploy.prototxt", (1, 3, 300, 300), (1, 3, 240, 320)),
    ("mobilenet-ssd unfolded", "mobilenet_ssd/deploy.prototxt", (1, 3, 300, 300), (1, 3, 240, 320)),
    ("mtcnn det1", "mtcnn/det1.prototxt", (1, 3, 12, 12), (1, 3, 240, 320)),
    ("mtcnn det3", "mtcnn/det3.prototxt", (1, 3, 48, 48), (16, 3, 48, 48)),
    # The YOLO forks': Reorg on the GPU, the detection outputs on the host.
    ("yolov2 darknet19", "yolo/darknet19_deploy.prototxt", (1, 3, 416, 416), (1, 3, 288, 352)),
    ("yolov3 mobilenet lite", "yolo/mobilenet_yolov3_lite_deploy.prototxt", (1, 3, 320, 320),
     (1, 3, 256, 384)),
]

TOLERANCE = 1e-4


def blobflow(exe, *args):
    done = subprocess.run([exe, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"blobflow {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def compare(np, cpu_dir, gpu_dir):
    """(worst relative difference and its blob, failures, notes)"""
    worst, failures, notes = (0.0, ""), [], []
    for name in sorted(os.listdir(cpu_dir)):
        want = np.load(os.path.join(cpu_dir, name)).astype(np.float64)
        path = os.path.join(gpu_dir, name)
        if not os.path.exists(path):
            failures.append(f"{name}: not written on the GPU")
            continue
        got = np.load(path).astype(np.float64)
        if name.startswith("detection_out"):
            rows = lambda a: a.reshape(-1, 7)[np.lexsort(a.reshape(-1, 7).T[::-1])]
            a, b = rows(got), rows(want)
            same = a.shape == b.shape and np.allclose(a, b, atol=1e-4)
            notes.append(f"{name}: {a.shape[0]} rows on the GPU, {b.shape[0]} on the CPU, "
                         f"{'the same set' if same else 'other rows at the ties'}")
            continue
        if got.shape != want.shape:
            failures.append(f"{name}: GPU shape {got.shape}, CPU {want.shape}")
            continue
        scale = max(np.abs(want).max(initial=0.0), 1e-30)
        rel = float(np.abs(got - want).max(initial=0.0) / scale)
        if not np.isfinite(rel) or rel > TOLERANCE:
            failures.append(f"{name}: GPU differs by {rel:.2e} of its largest value")
        if rel > worst[0]:
            worst = (rel, name[:-4])
    return worst, failures, notes


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    exe, nets, work = sys.argv[1:]
    try:
        import numpy as np
    except ImportError:
        print("gpu_nets: numpy is not installed here; nothing compared")
        return 0
    rng = np.random.default_rng(11)
    failed = 0
    for label, rel, declared, other in CASES:
        proto = os.path.join(nets, rel)
        for shape in (declared, other):
            case = os.path.join(work, label.replace(" ", "_") + "_" + "x".join(map(str, shape)))
            os.makedirs(case, exist_ok=True)
            x = os.path.join(case, "input.npy")
            np.save(x, rng.uniform(-1, 1, shape).astype(np.float32))
            try:
                for device in ("cpu", "cuda"):
                    blobflow(exe, "run", proto, "--fill", "3", "--input", f"data={x}",
                             "--out", os.path.join(case, device), "--all-blobs", "--device", device)
            except RuntimeError as e:
                print(f"{label} {shape}: FAILED to run: {e}")
                failed += 1
                continue
            (rel_diff, blob), failures, notes = compare(
                np, os.path.join(case, "cpu"), os.path.join(case, "cuda"))
            verdict = "FAILED" if failures else "ok"
            print(f"{label:24} {'x'.join(map(str, shape)):14} GPU vs CPU {verdict}: "
                  f"worst {rel_diff:.1e} of a blob's largest value ({blob})")
            for line in failures[:10] + notes:
                print(f"    {line}")
            failed += bool(failures)
            shutil.rmtree(case, ignore_errors=True)
    print()
    for label, rel, declared, _ in CASES:
        proto = os.path.join(nets, rel)
        for batch in sorted({1, declared[0]}):
            try:
                out = blobflow(exe, "time", proto, "--device", "cuda", "--batch", str(batch),
                               "--iterations", "50")
            except RuntimeError as e:
                print(f"{label} batch {batch}: FAILED to time: {e}")
                failed += 1
                continue
            lines = [l for l in out.splitlines() if l.startswith(("Average Forward pass", "Forward:"))]
            print(f"{label:24} batch {batch:>3} GPU, net alone, zeros: " + "; ".join(lines))
    print(f"\n{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
