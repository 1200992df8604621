#!/usr/bin/env python3
"""The peer of `cargo bench --bench lenet`: Caffe's LeNet in PyTorch eager.

Same net (conv 20 5x5, max pool 2, conv 50 5x5, max pool 2, inner product
500, ReLU, inner product 10, softmax), same cases: the forward pass and a
training step (softmax loss, SGD with momentum 0.9 and weight decay 5e-4)
at batch 64 and 1000, in images/s, best of three runs of at least 0.3 s.
Runs on the GPU when PyTorch sees one, else on the CPU; `--device cpu`
forces the CPU. Without PyTorch it says so and exits 0.

Run: python3 scripts/lenet_torch.py [--device cpu|cuda]
"""
import argparse
import sys
import time

BATCHES = (64, 1000)


def lenet(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 20, 5),
        nn.MaxPool2d(2, 2),
        nn.Conv2d(20, 50, 5),
        nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(800, 500),
        nn.ReLU(),
        nn.Linear(500, 10),
    )


def rate(torch, device, batch, step):
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    step()
    step()
    sync()
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        reps = 0
        while reps < 3 or time.perf_counter() - t < 0.3:
            step()
            reps += 1
        sync()
        best = max(best, reps * batch / (time.perf_counter() - t))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"))
    args = parser.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"no PyTorch: {e}")
        return 0
    name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    label = torch.cuda.get_device_name(device) if name == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"PyTorch {torch.__version__} eager on {label}")
    if name == "cuda":
        # PyTorch's defaults, left as they are: blobflow's bench-lenet
        # prints its GPU rows with f32 convolutions (gpu) and TF32 (gpu tf32).
        print(
            f"TF32 allowed: convolutions {torch.backends.cudnn.allow_tf32}, "
            f"matmuls {torch.backends.cuda.matmul.allow_tf32}"
        )
    torch.manual_seed(1701)
    for batch in BATCHES:
        net = lenet(torch).to(device)
        x = torch.rand(batch, 1, 28, 28, device=device)
        y = torch.arange(batch, device=device) % 10
        with torch.no_grad():
            forward = rate(torch, device, batch, lambda: torch.softmax(net(x), 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        loss_fn = torch.nn.CrossEntropyLoss()

        def train():
            opt.zero_grad(set_to_none=False)
            loss_fn(net(x), y).backward()
            opt.step()

        step = rate(torch, device, batch, train)
        print(f"torch {name:<6} forward    batch {batch:>4}  {forward:>12.0f} images/s")
        print(f"torch {name:<6} train step batch {batch:>4}  {step:>12.0f} images/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
