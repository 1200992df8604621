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

Nets of Caffe's forks whose layers OpenCV lacks or computes otherwise
are given to OpenCV rewritten into the same arithmetic in layers it has
(the rewrite is the whole difference, written out below): the BN fork's
layer as BatchNorm + Scale (its four blobs moved into theirs), Axpy as
Scale + Eltwise, PriorBox's fractional min_size / max_size cut to the
integers the SSD fork's `int min_size_` makes of them (Pelee's), and
py-faster-rcnn's Python proposal layer taken out, OpenCV fed blobflow's
proposals, which are held to a NumPy port of `rpn/proposal_layer.py`
instead. The YOLO forks' nets (eric612/MobileNet-YOLO) are given to
OpenCV with darknet's Reorg written as Reshape + Permute + Reshape and
their detection output taken out: OpenCV's outputs are the detection
layer's inputs, and blobflow's detections are held to a NumPy port of
the fork's `YoloDetectionOutput` / `Yolov3DetectionOutput` fed those
inputs. Such a net is timed on the rewritten prototxt on both sides.

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

# (label, prototxt, trained weights or None[, options]): options name the
# rewrite OpenCV needs ("opencv") and inputs besides the first ("inputs").
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
    ("se-resnet-50", "se_resnet50/SE-ResNet-50.prototxt", None, {"opencv": "axpy"}),
    ("pspnet-50 ade20k", "pspnet50_ade20k/pspnet50_ADE20K_473.prototxt", None, {"opencv": "bn"}),
    # OpenCV 4.14's depthwise convolution is wrong on a 1 x 1 input with
    # padding (its values reach 1e27; blobflow's equal NumPy's), and
    # SSDLite's last map is 1 x 1 at 300: compared at 600.
    ("mobilenetv2-ssdlite", "mobilenetv2_ssdlite/deploy.prototxt", None, {"shape": [1, 3, 600, 600]}),
    ("pelee-ssd", "pelee_ssd/deploy_merged.prototxt", None, {"opencv": "integer prior sizes"}),
    ("py-faster-rcnn zf", "faster_rcnn_zf/faster_rcnn_test.pt", None,
     {"opencv": "proposal", "inputs": {"im_info": [[224.0, 224.0, 1.0]]}}),
    ("py-r-fcn resnet-50", "rfcn_resnet50/test_agnostic.prototxt", None,
     {"opencv": "proposal", "inputs": {"im_info": [[224.0, 224.0, 1.0]]}}),
    # The YOLO forks' nets at a smaller input than declared (any multiple
    # of 32 is theirs to take), to keep the run short.
    # Random weights give YOLOv2's 20-class softmax scores near 1/20:
    # its confidences sit near 0.03.
    ("yolov2 darknet19", "yolo/darknet19_deploy.prototxt", None,
     {"opencv": "yolo", "shape": [1, 3, 224, 224], "confidence": 0.029}),
    ("yolov2 mobilenet lite", "yolo/mobilenet_yolo_lite_deploy.prototxt", None,
     {"opencv": "yolo", "confidence": 0.031}),
    ("yolov3 mobilenet lite", "yolo/mobilenet_yolov3_lite_deploy.prototxt", None, {"opencv": "yolo"}),
    ("yolov3-tiny", "yolo/yolov3-tiny.prototxt", None, {"opencv": "yolo"}),
    ("yolov3", "yolo/yolov3.prototxt", None, {"opencv": "yolo", "shape": [1, 3, 256, 256]}),
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


def importable(modules, site, packages, no_deps=False):
    """Whether `modules` import, pip-installing `packages` under
    target/`site` first where they do not (and it has not been done)."""
    import importlib
    try:
        for m in modules:
            importlib.import_module(m)
        return True
    except ImportError:
        pass
    target = os.path.join(ROOT, "target", site)
    if not os.path.isdir(os.path.join(target, modules[0])):
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--target", target] + (["--no-deps"] if no_deps else []) + packages
        if subprocess.run(pip).returncode != 0:
            return False
    sys.path.insert(0, target)
    try:
        for m in modules:
            importlib.import_module(m)
    except ImportError:
        return False
    return True


def load_peer():
    """numpy and cv2, installed under target/ where missing."""
    if not importable(["cv2", "numpy"], "python-opencv", ["opencv-python-headless<5", "numpy"]):
        return None
    import cv2
    import numpy
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


def detections_on_our_inputs(cv2, np, text, layer, out_dir, work):
    """OpenCV's DetectionOutput `layer` alone, fed the inputs blobflow's
    net computed (its saved blobs)."""
    body = next(b for _, _, b in layers_of(text) if field(b, "name") == layer)
    bottoms = re.findall(r'bottom:\s*"([^"]+)"', body)
    inputs = {b: np.load(os.path.join(out_dir, b.replace("/", "_") + ".npy")) for b in bottoms}
    head = "".join(f'input: "{b}"\ninput_shape {{ {" ".join(f"dim: {d}" for d in v.shape)} }}\n'
                   for b, v in inputs.items())
    path = os.path.join(work, "detection.prototxt")
    with open(path, "w") as f:
        f.write(head + body + "\n")
    net = cv2.dnn.readNetFromCaffe(path)
    for b, v in inputs.items():
        net.setInput(v, b)
    return net.forward(layer)


def softmax_inputs(text):
    """The bottoms of the net's Softmax layers."""
    found = []
    for layer in re.findall(r"layers?\s*{(.*?)\n}", text, re.S):
        if re.search(r'type:\s*"Softmax"', layer):
            m = re.search(r'bottom:\s*"([^"]+)"', layer)
            if m:
                found.append(m.group(1))
    return found


# --- A minimal protobuf codec, for the weights the BN rewrite moves ---

def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _fields(buf):
    """(number, wire type, value) of each field: ints for varints,
    bytes for the rest."""
    i, out = 0, []
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    return out


def _enc_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _enc_len(number, payload):
    return _enc_varint(number << 3 | 2) + _enc_varint(len(payload)) + payload


def _blob_values(np, blob):
    """A BlobProto's float data (packed or not)."""
    values = []
    for number, wire, value in _fields(blob):
        if number == 5:
            values.append(np.frombuffer(value, dtype="<f4") if wire == 2 else np.frombuffer(value, "<f4"))
    return np.concatenate(values) if values else np.zeros(0, np.float32)


def _blob_proto(np, values, dims=None):
    """A BlobProto of a float array, of shape `dims` (default 1-D)."""
    values = np.asarray(values, dtype="<f4").ravel()
    shape = _enc_len(1, b"".join(_enc_varint(int(d)) for d in (dims or [values.size])))
    return _enc_len(7, shape) + _enc_len(5, values.tobytes())


def _layer(name, kind, blobs):
    return (_enc_len(1, name.encode()) + _enc_len(2, kind.encode())
            + b"".join(_enc_len(7, b) for b in blobs))


def layers_of(text):
    """Each `layer { ... }` block of a prototxt: (start, end, body)."""
    found, depth, start = [], 0, None
    for m in re.finditer(r"\blayers?\s*{|[{}]", text):
        tok = m.group(0)
        if tok != "}" and tok != "{" and depth == 0:
            start, depth = m.start(), 1
        elif tok == "}" and start is not None:
            depth -= 1
            if depth == 0:
                found.append((start, m.end(), text[start:m.end()]))
                start = None
        elif start is not None:
            depth += 1
    return found


def field(body, key):
    m = re.search(rf"\b{key}:\s*['\"]([^'\"]+)['\"]", body)
    return m.group(1) if m else None


def rewrite_bn(np, text, model_path, out_path):
    """The BN fork's layers as BatchNorm (its mean and variance, scale
    factor 1, its eps) and Scale (its slope and bias), in the prototxt
    and in the weights blobflow saved."""
    renamed = {}
    pieces, at = [], 0
    for start, end, body in layers_of(text):
        if field(body, "type") != "BN":
            continue
        name, bottom, top = field(body, "name"), field(body, "bottom"), field(body, "top")
        eps = re.search(r"\beps:\s*([0-9.eE+-]+)", body)
        eps = eps.group(1) if eps else "1e-5"
        pieces.append(text[at:start])
        pieces.append(
            f'layer {{ name: "{name}" type: "BatchNorm" bottom: "{bottom}" top: "{top}" '
            f"batch_norm_param {{ use_global_stats: true eps: {eps} }} }}\n"
            f'layer {{ name: "{name}/as_scale" type: "Scale" bottom: "{top}" top: "{top}" '
            f"scale_param {{ bias_term: true }} }}")
        at = end
        renamed[name] = True
    pieces.append(text[at:])
    out = []
    for number, wire, value in _fields(open(model_path, "rb").read()):
        if number != 100:
            continue
        parts = _fields(value)
        name = next((v.decode() for n, _, v in parts if n == 1), "")
        if name not in renamed:
            out.append(_enc_len(100, value))
            continue
        slope, bias, mean, var = [_blob_values(np, v) for n, _, v in parts if n == 7]
        out.append(_enc_len(100, _layer(name, "BatchNorm", [
            _blob_proto(np, mean), _blob_proto(np, var), _blob_proto(np, [1.0])])))
        out.append(_enc_len(100, _layer(name + "/as_scale", "Scale", [
            _blob_proto(np, slope), _blob_proto(np, bias)])))
    with open(out_path, "wb") as f:
        f.write(b"".join(out))
    return "".join(pieces)


def rewrite_axpy(text):
    """Axpy(a, x, y) as Scale(x, a flattened to (N, C)) + Eltwise SUM."""
    pieces, at = [], 0
    for start, end, body in layers_of(text):
        if field(body, "type") != "Axpy":
            continue
        name, top = field(body, "name"), field(body, "top")
        a, x, y = re.findall(r"\bbottom:\s*['\"]([^'\"]+)['\"]", body)
        pieces.append(text[at:start])
        pieces.append(
            f'layer {{ name: "{name}/a" type: "Reshape" bottom: "{a}" top: "{name}/a" '
            f"reshape_param {{ shape {{ dim: 0 dim: 0 }} }} }}\n"
            f'layer {{ name: "{name}/ax" type: "Scale" bottom: "{x}" bottom: "{name}/a" '
            f'top: "{name}/ax" scale_param {{ axis: 0 }} }}\n'
            f'layer {{ name: "{name}" type: "Eltwise" bottom: "{name}/ax" bottom: "{y}" top: "{top}" }}')
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def rewrite_proposal(text):
    """py-faster-rcnn's Python proposal layer taken out: its `rois`
    become an input OpenCV is fed. Returns the text and the layer's
    param_str."""
    for start, end, body in layers_of(text):
        if field(body, "type") == "Python" and field(body, "module") == "rpn.proposal_layer":
            top = field(body, "top")
            param = re.search(r"param_str:\s*\"([^\"]*)\"", body)
            stride = re.search(r"'feat_stride':\s*(\d+)", param.group(1) if param else "")
            declared = (f'layer {{ name: "{top}" type: "Input" top: "{top}" '
                        f"input_param {{ shape {{ dim: 1 dim: 5 }} }} }}")
            out = text[:start] + declared + text[end:]
            # Inputs only the proposal layer read (im_info) go too: OpenCV
            # refuses a declared input nothing reads.
            for m in re.finditer(r"input:\s*['\"]([^'\"]+)['\"]\s*input_shape\s*{[^}]*}", out):
                if not re.search(rf"\bbottom:\s*['\"]{re.escape(m.group(1))}['\"]", out):
                    out = out.replace(m.group(0), "")
            return out, top, int(stride.group(1)) if stride else 16
    raise ValueError("no rpn.proposal_layer Python layer")


def yolo_layers(text):
    """(type, bottoms, parameters, top) of each YOLO detection output."""
    found = []
    for _, _, body in layers_of(text):
        kind = field(body, "type")
        if kind not in ("YoloDetectionOutput", "Yolov3DetectionOutput"):
            continue
        numbers = lambda key: [float(v) for v in re.findall(rf"\b{key}:\s*([0-9.eE+-]+)", body)]
        one = lambda key, default: (numbers(key) or [default])[0]
        v3 = kind == "Yolov3DetectionOutput"
        params = {
            "classes": int(one("num_classes", 20)), "boxes": int(one("num_box", 3 if v3 else 5)),
            "confidence": one("confidence_threshold", 0.01), "nms": one("nms_threshold", 0.45),
            "biases": numbers("biases"), "mask": [int(m) for m in numbers("mask")],
            "anchors_scale": [int(a) for a in numbers("anchors_scale")],
            "groups": int(one("mask_group_num", 2)),
            "gaussian": bool(re.search(r"\bgaussian_box:\s*true", body)),
        }
        found.append((kind, re.findall(r"\bbottom:\s*['\"]([^'\"]+)['\"]", body), params, field(body, "top")))
    return found


def without_layers(text, kinds):
    """The prototxt without its layers of the types `kinds`."""
    pieces, at = [], 0
    for start, end, body in layers_of(text):
        if field(body, "type") in kinds:
            pieces.append(text[at:start])
            at = end
    pieces.append(text[at:])
    return "".join(pieces)


DETECTION_OUTPUTS = ("DetectionOutput", "YoloDetectionOutput", "Yolov3DetectionOutput")


def rewrite_yolo(np, text, out_dir, model_path, out_path):
    """For OpenCV: darknet's Reorg as Reshape + Permute + Reshape (its
    input, C x H x W, read as C/s² x H·s x W·s: axes (c2, h, oy, w, ox)
    of C/s², H, s, W, s, put in the order (oy, ox, c2, h, w)); YOLO's
    Upsample as a Deconvolution of one s x s kernel of ones a channel
    (its weights added to a copy of the model); DepthwiseConvolution as
    Convolution with `group` its `num_output`; the YOLO detection outputs
    taken out. Returns the text and the layers whose outputs the
    detection outputs read."""
    pieces, at, feeds, ones = [], 0, [], {}
    for start, end, body in layers_of(text):
        kind = field(body, "type")
        if kind == "DepthwiseConvolution":
            pieces.append(text[at:start])
            conv = body.replace('"DepthwiseConvolution"', '"Convolution"', 1)
            if not re.search(r"\bgroup:", conv):
                outputs = re.search(r"\bnum_output:\s*(\d+)", conv).group(1)
                conv = re.sub(r"(convolution_param\s*{)", rf"\1 group: {outputs}", conv, count=1)
            pieces.append(conv)
            at = end
        elif kind == "Upsample":
            name, bottom, top = field(body, "name"), field(body, "bottom"), field(body, "top")
            scale = int(re.search(r"\bscale:\s*(\d+)", body).group(1))
            channels = np.load(os.path.join(out_dir, bottom.replace("/", "_") + ".npy")).shape[1]
            pieces.append(text[at:start])
            pieces.append(
                f'layer {{ name: "{name}" type: "Deconvolution" bottom: "{bottom}" top: "{top}" '
                f"convolution_param {{ num_output: {channels} group: {channels} kernel_size: {scale} "
                f"stride: {scale} bias_term: false }} }}")
            ones[name] = _layer(name, "Deconvolution", [
                _blob_proto(np, np.ones(channels * scale * scale), (channels, 1, scale, scale))])
            at = end
        elif kind in ("YoloDetectionOutput", "Yolov3DetectionOutput"):
            pieces.append(text[at:start])
            at = end
            feeds += re.findall(r"\bbottom:\s*['\"]([^'\"]+)['\"]", body)
        elif kind == "Reorg":
            name, bottom, top = field(body, "name"), field(body, "bottom"), field(body, "top")
            s = int(re.search(r"\bstride:\s*(\d+)", body).group(1))
            reverse = bool(re.search(r"\breverse:\s*true", body))
            _, c, h, w = np.load(os.path.join(out_dir, bottom.replace("/", "_") + ".npy")).shape
            dims = lambda *d: " ".join(f"dim: {v}" for v in d)
            if reverse:
                first, order, last = (0, s, s, c // (s * s), h, w), (0, 3, 4, 1, 5, 2), (0, c // (s * s), h * s, w * s)
            else:
                first, order, last = (0, c // (s * s), h, s, w, s), (0, 3, 5, 1, 2, 4), (0, c * s * s, h // s, w // s)
            pieces.append(text[at:start])
            pieces.append(
                f'layer {{ name: "{name}/6d" type: "Reshape" bottom: "{bottom}" top: "{name}/6d" '
                f"reshape_param {{ shape {{ {dims(*first)} }} }} }}\n"
                f'layer {{ name: "{name}/moved" type: "Permute" bottom: "{name}/6d" top: "{name}/moved" '
                f"permute_param {{ {' '.join(f'order: {o}' for o in order)} }} }}\n"
                f'layer {{ name: "{name}" type: "Reshape" bottom: "{name}/moved" top: "{top}" '
                f"reshape_param {{ shape {{ {dims(*last)} }} }} }}")
            at = end
    pieces.append(text[at:])
    out = []
    for number, wire, value in _fields(open(model_path, "rb").read()):
        if number != 100:
            continue
        name = next((v.decode() for n, _, v in _fields(value) if n == 1), "")
        out.append(_enc_len(100, ones.pop(name, value)))
    out += [_enc_len(100, layer) for layer in ones.values()]
    with open(out_path, "wb") as f:
        f.write(b"".join(out))
    return "".join(pieces), feeds


def yolo_reference(np, kind, p, inputs):
    """The fork's YoloDetectionOutput / Yolov3DetectionOutput forward at
    batch 1 (eric612/MobileNet-YOLO's .cpp files), in NumPy: the rows."""
    sig = lambda v: (1.0 / (1.0 + np.exp(-v.astype(np.float64)))).astype(np.float32)
    found = []  # (confidence, x, y, w, h, class), in the fork's order
    if kind == "YoloDetectionOutput":
        for x in inputs:
            _, c, h, w = x.shape
            f = x[0].reshape(p["boxes"], c // p["boxes"], h, w)
            logits = f[:, 5:5 + p["classes"]].astype(np.float32)
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            probs = e / e.sum(axis=1, keepdims=True)
            cls, best = probs.argmax(axis=1), probs.max(axis=1)
            conf = sig(f[:, 4]) * best  # (box, row, col)
            bias = np.asarray(p["biases"], np.float32)
            # The fork's loops run row, column, box.
            for j, i, n in zip(*np.nonzero(np.transpose(conf >= np.float32(p["confidence"]), (1, 2, 0)))):
                found.append((conf[n, j, i], (i + sig(f[n, 0, j, i])) / np.float32(w),
                              (j + sig(f[n, 1, j, i])) / np.float32(h),
                              np.exp(f[n, 2, j, i]) * bias[2 * n] / np.float32(w),
                              np.exp(f[n, 3, j, i]) * bias[2 * n + 1] / np.float32(h), cls[n, j, i]))
    else:
        g = p["gaussian"]
        length = (9 if g else 5) + p["classes"]
        per_group = len(p["mask"]) // p["groups"]
        bias = np.asarray(p["biases"], np.float32)
        for t, x in enumerate(inputs):
            _, _, h, w = x.shape
            f = x[0].reshape(p["boxes"], length, h, w)
            if g:
                uncertainty = sum(sig(f[:, k]).astype(np.float64) for k in (1, 3, 5, 7))
                obj = (sig(f[:, 8]).astype(np.float64) * (4.0 - uncertainty) / 4.0).astype(np.float32)
                tx, ty, tw, th, first = sig(f[:, 0]), sig(f[:, 2]), f[:, 4], f[:, 6], 9
            else:
                obj, tx, ty, tw, th, first = sig(f[:, 4]), sig(f[:, 0]), sig(f[:, 1]), f[:, 2], f[:, 3], 5
            scores = sig(f[:, first:first + p["classes"]]) * obj[:, None]  # (box, class, row, col)
            nw, nh = np.float32(w * p["anchors_scale"][t]), np.float32(h * p["anchors_scale"][t])
            passing = np.transpose(scores > np.float32(p["confidence"]), (2, 3, 0, 1))  # cell, box, class
            for j, i, n, c in zip(*np.nonzero(passing)):
                m = p["mask"][n + t * per_group]
                found.append((scores[n, c, j, i], (i + tx[n, j, i]) / np.float32(w),
                              (j + ty[n, j, i]) / np.float32(h), np.exp(tw[n, j, i]) * bias[2 * m] / nw,
                              np.exp(th[n, j, i]) * bias[2 * m + 1] / nh, c))
    # A stable sort, best first; a box goes where a kept better one
    # overlaps it by nms_threshold or more (the fork's ApplyNms).
    order = sorted(range(len(found)), key=lambda k: -float(found[k][0]))
    boxes = np.array([found[k][1:5] for k in order], np.float32).reshape(-1, 4)
    kept, held = [], np.zeros((0, 4), np.float32)
    for k, (x, y, w, h) in zip(order, boxes):
        iw = np.minimum(held[:, 0] + held[:, 2] / 2, x + w / 2) - np.maximum(held[:, 0] - held[:, 2] / 2, x - w / 2)
        ih = np.minimum(held[:, 1] + held[:, 3] / 2, y + h / 2) - np.maximum(held[:, 1] - held[:, 3] / 2, y - h / 2)
        inter = np.where((iw < 0) | (ih < 0), np.float32(0), iw * ih)
        if not np.any(inter / (held[:, 2] * held[:, 3] + w * h - inter) >= np.float32(p["nms"])):
            kept.append(found[k])
            held = np.vstack([held, [[x, y, w, h]]]).astype(np.float32)
    if not kept:
        return np.array([[0, -1, -1, -1, -1, -1, -1]], np.float32)
    return np.array([[0, c + 1, conf, x - w / 2, y - h / 2, x + w / 2, y + h / 2]
                     for conf, x, y, w, h, c in kept], np.float32)


def proposals_reference(np, scores, deltas, im_info, feat_stride):
    """py-faster-rcnn's rpn/proposal_layer.py forward (TEST settings:
    6000 before NMS, 300 after, threshold 0.7, min size 16), in NumPy."""
    def whctrs(a):
        w, h = a[2] - a[0] + 1, a[3] - a[1] + 1
        return w, h, a[0] + 0.5 * (w - 1), a[1] + 0.5 * (h - 1)

    def mkanchors(ws, hs, x, y):
        ws, hs = ws[:, None], hs[:, None]
        return np.hstack((x - 0.5 * (ws - 1), y - 0.5 * (hs - 1), x + 0.5 * (ws - 1), y + 0.5 * (hs - 1)))

    base = np.array([1, 1, 16, 16]) - 1
    w, h, x, y = whctrs(base)
    ratios, scales = np.array([0.5, 1, 2]), np.array([8, 16, 32])
    ws = np.round(np.sqrt(w * h / ratios))
    ratio_anchors = mkanchors(ws, np.round(ws * ratios), x, y)
    anchors = np.vstack([mkanchors(whctrs(r)[0] * scales, whctrs(r)[1] * scales, whctrs(r)[2], whctrs(r)[3])
                         for r in ratio_anchors])
    a = anchors.shape[0]
    fg = scores[:, a:, :, :]
    height, width = fg.shape[-2:]
    sx, sy = np.meshgrid(np.arange(width) * feat_stride, np.arange(height) * feat_stride)
    shifts = np.vstack((sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel())).transpose()
    all_anchors = (anchors.reshape((1, a, 4)) + shifts.reshape((1, -1, 4)).transpose((1, 0, 2))).reshape((-1, 4))
    d = deltas.transpose((0, 2, 3, 1)).reshape((-1, 4))
    fg = fg.transpose((0, 2, 3, 1)).reshape((-1, 1))
    widths = all_anchors[:, 2] - all_anchors[:, 0] + 1.0
    heights = all_anchors[:, 3] - all_anchors[:, 1] + 1.0
    cx = d[:, 0] * widths + all_anchors[:, 0] + 0.5 * widths
    cy = d[:, 1] * heights + all_anchors[:, 1] + 0.5 * heights
    pw, ph = np.exp(d[:, 2]) * widths, np.exp(d[:, 3]) * heights
    boxes = np.stack((cx - 0.5 * pw, cy - 0.5 * ph, cx + 0.5 * pw, cy + 0.5 * ph), axis=1)
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, im_info[1] - 1)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, im_info[0] - 1)
    size = 16 * im_info[2]
    keep = np.where((boxes[:, 2] - boxes[:, 0] + 1 >= size) & (boxes[:, 3] - boxes[:, 1] + 1 >= size))[0]
    boxes, fg = boxes[keep], fg[keep]
    order = fg.ravel().argsort(kind="stable")[::-1][:6000]
    boxes, fg = boxes[order], fg[order]
    areas = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    kept, suppressed = [], np.zeros(len(boxes), bool)
    for i in range(len(boxes)):
        if suppressed[i]:
            continue
        kept.append(i)
        xx1 = np.maximum(boxes[i, 0], boxes[i + 1:, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[i + 1:, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[i + 1:, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[i + 1:, 3])
        inter = np.maximum(0.0, xx2 - xx1 + 1) * np.maximum(0.0, yy2 - yy1 + 1)
        suppressed[i + 1:] |= inter / (areas[i] + areas[i + 1:] - inter) >= 0.7
    kept = kept[:300]
    return np.hstack((np.zeros((len(kept), 1)), boxes[kept])).astype(np.float32)


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
        for label, proto_rel, weights_rel, *rest in CASES:
            if args.only and args.only != label:
                continue
            options = rest[0] if rest else {}
            proto = located(proto_rel)
            text = open(proto).read()
            detections = detection_layers(text)
            if yolo_layers(text):
                # Random weights put every score near 1/2 (a sigmoid) or
                # 1/classes (a softmax): a threshold that keeps hundreds.
                text = re.sub(r"confidence_threshold:\s*[0-9.eE+-]+",
                              f"confidence_threshold: {options.get('confidence', 0.3)}", text)
                proto = os.path.join(work, "yolo.prototxt")
                with open(proto, "w") as f:
                    f.write(text)
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
            shape = options.get("shape", [1] + shape[1:])
            x = np.random.RandomState(0).rand(*shape).astype(np.float32)
            xin = os.path.join(work, "input.npy")
            np.save(xin, x)
            out_dir = os.path.join(work, "out")
            shutil.rmtree(out_dir, ignore_errors=True)
            saved = os.path.join(work, "weights.caffemodel")
            weights = [located(weights_rel)] if weights_rel else ["--fill", "1701"]
            extra = {k: np.asarray(v, dtype=np.float32) for k, v in options.get("inputs", {}).items()}
            feeds_in = []
            for k, v in extra.items():
                path = os.path.join(work, f"input_{k}.npy")
                np.save(path, v)
                feeds_in += ["--input", f"{k}={path}"]
            run = cmd + ["run", proto] + weights + [
                "--input", f"{name}={xin}", "--out", out_dir, "--save", saved, "--all-blobs"] + feeds_in
            r = subprocess.run(run, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                reason = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
                print(f"{label}: skipped: blobflow cannot run it yet: {reason}")
                skipped += 1
                continue
            cv_proto, cv_model, rewrite = proto, saved, options.get("opencv")
            if rewrite:
                cv_text = text
                if rewrite == "bn":
                    cv_model = os.path.join(work, "opencv.caffemodel")
                    cv_text = rewrite_bn(np, text, saved, cv_model)
                elif rewrite == "axpy":
                    cv_text = rewrite_axpy(text)
                elif rewrite == "integer prior sizes":
                    cv_text = re.sub(r"\b(min_size|max_size):\s*([0-9.eE+-]+)",
                                     lambda m: f"{m.group(1)}: {int(float(m.group(2)))}", text)
                elif rewrite == "yolo":
                    cv_model = os.path.join(work, "opencv.caffemodel")
                    cv_text, yolo_feeds = rewrite_yolo(np, text, out_dir, saved, cv_model)
                    for kind, bottoms, params, top in yolo_layers(text):
                        ours = np.load(os.path.join(out_dir, top.replace("/", "_") + ".npy"))
                        inputs = [np.load(os.path.join(out_dir, b.replace("/", "_") + ".npy")) for b in bottoms]
                        want = yolo_reference(np, kind, params, inputs)
                        gap = compare_detections(np, ours, want)
                        found = int(np.sum(ours.reshape(-1, 7)[:, 1] >= 0))
                        agree = gap is not None and gap <= 1e-4
                        print(f"{label}: {top}: {found} detections against the NumPy port of the fork's "
                              f"{kind}: " + (f"{'agree' if agree else 'DIFFER'}, largest gap {gap:.2e}"
                                             if gap is not None else "DIFFER in count or labels"))
                        failed += not agree
                elif rewrite == "proposal":
                    cv_text, rois, stride = rewrite_proposal(text)
                    ours = np.load(os.path.join(out_dir, rois + ".npy"))
                    want = proposals_reference(
                        np, np.load(os.path.join(out_dir, "rpn_cls_prob_reshape.npy")),
                        np.load(os.path.join(out_dir, "rpn_bbox_pred.npy")), extra["im_info"][0], stride)
                    gap = float(np.max(np.abs(ours - want), initial=0.0)) if ours.shape == want.shape else None
                    agree = gap is not None and gap <= 1e-3
                    print(f"{label}: {rois}: {len(ours)} proposals against the NumPy port of "
                          f"rpn/proposal_layer.py's {len(want)}: "
                          + (f"{'agree' if agree else 'DIFFER'}, largest gap {gap:.2e} px" if gap is not None
                             else "DIFFER in count"))
                    failed += not agree
                    extra[rois] = ours
                cv_proto = os.path.join(work, "opencv.prototxt")
                with open(cv_proto, "w") as f:
                    f.write(cv_text)
            net = cv2.dnn.readNetFromCaffe(cv_proto, cv_model)
            net.setInput(x, name)
            for k, v in extra.items():
                # An input only the rewritten-out layer read is not fed.
                if re.search(rf"\bbottom:\s*['\"]{re.escape(k)}['\"]", open(cv_proto).read()):
                    net.setInput(v, k)
            # OpenCV names outputs by layer, blobflow's files by blob: a
            # layer's file is its top's. A layer without tops (Silence) is
            # an output to OpenCV only.
            top_of = {field(body, "name"): field(body, "top") for _, _, body in layers_of(text)}

            def saved_as(layer):
                return os.path.join(out_dir, (top_of.get(layer) or layer).replace("/", "_") + ".npy")

            outs = [o for o in net.getUnconnectedOutLayersNames() if os.path.exists(saved_as(o))]
            scores = [b for b in softmax_inputs(text) if b not in outs and b in net.getLayerNames()]
            feeds = [b for d in detections for b in d[:3] if b in net.getLayerNames()]
            if rewrite == "yolo":
                # OpenCV names an output by its layer: a detection input's.
                feeds += [layer for layer in yolo_feeds
                          if layer in net.getLayerNames() and layer not in outs + feeds]
            # A prototxt may name more blobs to compare: "# compare: a b".
            named = re.search(r"^# compare:(.*)$", text, re.M)
            feeds += [b for b in (named.group(1).split() if named else [])
                      if b in net.getLayerNames() and b not in outs + scores + feeds]
            got = net.forward(outs + scores + feeds)
            worst = 0.0
            for out_name, theirs in zip(outs + scores + feeds, got):
                ours = np.load(saved_as(out_name))
                if detections and out_name in outs:
                    # Random weights leave hundreds of boxes within an ulp
                    # of each other, and which of two near-equal boxes NMS
                    # keeps first decides the rest: the layer is compared
                    # on blobflow's own inputs (those inputs against
                    # OpenCV's whole net just below).
                    theirs = detections_on_our_inputs(cv2, np, text, out_name, out_dir, work)
                    diff = compare_detections(np, ours, theirs)
                    if diff is None:
                        print(f"{label}: {out_name}: the detections differ in count, image or label")
                        diff = float("inf")
                    worst = max(worst, diff)
                    rows = ours.reshape(-1, 7)
                    found = int(np.sum(rows[:, 1] >= 0))
                    print(f"{label}: {out_name}: {found} detections, {len(rows) - found} empty rows; "
                          f"OpenCV's layer on the same inputs: " + ("differs" if diff == float("inf")
                                                                    else f"largest gap {diff:.2e}"))
                    continue
                theirs = np.asarray(theirs).reshape(ours.shape)
                scale = max(float(np.max(np.abs(theirs))), 1e-30)
                worst = max(worst, float(np.max(np.abs(ours - theirs))) / scale)
            ok = worst <= 1e-4
            compared += 1
            failed += not ok
            print(f"{label}: {'agrees' if ok else 'DIFFERS'}: {', '.join(outs + scores + feeds)} within {worst:.2e} of their scale")
            if args.bench and ok:
                if rewrite == "proposal":
                    # OpenCV would run the net without its proposals: not
                    # like with like.
                    print(f"  {label}: not timed (OpenCV runs it without its proposal layer)")
                elif rewrite == "yolo":
                    # Both run the rewritten net: like with like.
                    print(f"  {label}: timed without its detection output, Reorg rewritten, both sides")
                    bench(cv2, np, cmd, env, label, (cv_proto, cv_model), (cv_proto, cv_model), name,
                          open(cv_proto).read(), args.threads, args.repeat, options.get("shape"))
                else:
                    bench(cv2, np, cmd, env, label, (proto, saved), (cv_proto, cv_model), name, text,
                          args.threads, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{compared} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def bench(cv2, np, cmd, env, label, ours, theirs, name, text, threads, repeat, shape=None):
    """Forward images/s, blobflow (`ours`: prototxt and weights) against
    OpenCV (`theirs`: the same net, rewritten where a fork's layer needs
    it), at batch 1 and the declared batch, at the declared image size
    (or at `shape` alone, where the case gives one), inputs zeros, net
    alone; `repeat` timings of each, alternating, their medians and the
    range of the ratios."""
    proto, weights = ours
    _, declared = declared_input(np, text)
    declared = shape or declared
    for batch in sorted({1, declared[0]}):
        def blobflow_ms(iters):
            size = (["--shape", f"{name}={','.join(str(d) for d in [batch] + declared[1:])}"] if shape
                    else ["--batch", str(batch)])
            # --reuse-memory: intermediate blobs share memory, as OpenCV's
            # own blob reuse does; only the outputs are kept.
            r = subprocess.run(cmd + ["time", proto, "--weights", weights, "--iterations", str(iters),
                                      "--reuse-memory"] + size, capture_output=True, text=True, env=env)
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
        net = cv2.dnn.readNetFromCaffe(*theirs)
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
        print(f"  {label} batch {batch} ({threads} thread(s), forward, zeros, blobflow reusing memory): blobflow {ours:.1f} images/s, "
              f"OpenCV {theirs:.1f} images/s, {what}ratio {ours / theirs:.2f}x{spread}{rates}")


def median(values):
    """The middle value (the mean of the two middle ones)."""
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


if __name__ == "__main__":
    sys.exit(main())
