#!/usr/bin/env python3
"""Reads a converted model with Python's own safetensors and numpy, and
holds it to what `blobflow inspect --json` says of the original
.caffemodel: the same tensors (`layer.index`), shapes, first values
(exactly) and sums of |x|.

Needs Python's numpy and safetensors (`.ci/run` installs them under
target/python-safetensors; `pip install numpy safetensors` does too).

Run: python3 scripts/check_safetensors.py OUT.safetensors INSPECT.json
"""
import json
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError:
    sys.exit("check_safetensors: needs numpy and safetensors: pip install numpy safetensors")


def main(tensors_path, inspect_path):
    tensors = load_file(tensors_path)
    with open(inspect_path) as f:
        model = json.load(f)
    expected = {}
    for layer in model["layers"]:
        for index, blob in enumerate(layer["blobs"]):
            expected[f"{layer['name']}.{index}"] = blob
    if sorted(tensors) != sorted(expected):
        sys.exit(f"tensor names differ: {sorted(tensors)} vs {sorted(expected)}")
    for name, blob in expected.items():
        t = tensors[name]
        if t.dtype != np.float32 or list(t.shape) != blob["shape"]:
            sys.exit(f"{name}: {t.dtype} {list(t.shape)}, expected float32 {blob['shape']}")
        first = t.reshape(-1)[:5].astype(np.float64).tolist()
        if first != blob["first5"]:
            sys.exit(f"{name}: first values {first}, expected {blob['first5']}")
        asum = float(np.abs(t.astype(np.float64)).sum())
        if abs(asum - blob["sum_abs"]) > 1e-9 * max(1.0, blob["sum_abs"]):
            sys.exit(f"{name}: sum |x| {asum}, expected {blob['sum_abs']}")
    print(f"{tensors_path}: {len(tensors)} tensors read by Python's safetensors match the model")


if __name__ == "__main__":
    main(*sys.argv[1:])
