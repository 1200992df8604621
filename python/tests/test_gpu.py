"""blobflow's Python module built with its `cuda` feature: Caffe's LeNet
on a GPU through `Net(..., device="cuda")`, against the same net on the
CPU. CI runs it on the CPU CUDA driver (scripts/cuda-on-cpu.sh); on a
machine with a GPU it runs there.

    cargo build -p blobflow-python --features cuda
    mkdir -p /tmp/bfc && cp target/debug/libblobflow_python.so /tmp/bfc/blobflow.abi3.so
    PYTHONPATH=/tmp/bfc python3 python/tests/test_gpu.py
"""

import os
import sys
import unittest

import numpy as np

import blobflow

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_blobflow import LENET, digits  # noqa: E402


class LenetOnTheGpu(unittest.TestCase):
    def test_the_module_says_it_has_cuda(self):
        self.assertTrue(blobflow.CUDA)

    def test_the_gpu_gives_the_cpus_probabilities(self):
        model = os.path.join(LENET, "lenet.prototxt")
        weights = os.path.join(LENET, "lenet_iter_10000.caffemodel")
        gpu = blobflow.Net(model, weights, device="cuda")
        self.assertTrue(gpu.device.startswith("cuda:0 ("), gpu.device)
        cpu = blobflow.Net(model, weights)
        images, labels = digits(64)
        on_gpu = np.from_dlpack(gpu.forward(data=images)["prob"]).copy()
        on_cpu = np.from_dlpack(cpu.forward(data=images)["prob"]).copy()
        np.testing.assert_allclose(on_gpu, on_cpu, atol=1e-5)
        right = int((on_gpu.argmax(axis=1) == labels).sum())
        self.assertGreaterEqual(right, 63)
        # Another batch size reshapes the net on the device.
        few, few_labels = digits(3)
        prob = np.from_dlpack(gpu.forward(data=few)["prob"])
        np.testing.assert_array_equal(prob.argmax(axis=1), few_labels)

    def test_a_gpu_that_is_not_there_is_named(self):
        model = os.path.join(LENET, "lenet.prototxt")
        with self.assertRaises(blobflow.BlobflowError) as refused:
            blobflow.Net(model, device="cuda:7")
        self.assertIn("7", str(refused.exception))


if __name__ == "__main__":
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}")
    unittest.main(verbosity=2)
