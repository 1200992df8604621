#!/usr/bin/env python3
"""Compile-time cost of typed blobs and typed nets.

Generates two crates with the same program, N layer functions over 2N
distinct shapes (N = 30, then 200): one on typed blobs (`blob!` shapes,
shape relations checked by the compiler), one on dynamic `Blob<f32>`
(checked at run time). Then ResNet-50 (228 layers, 16 residual branches)
declared as a typed net (`NetSpec`, every output shape computed by the
compiler), against the same net from its prototxt text (`Net::from_prototxt`).
Builds blobflow once, then times a debug build (and `cargo check`) of each
crate alone, from clean (dependencies excluded), the two crates built in
turn, best of three rounds (of five for ResNet-50), with the median CPU
time of the compiler beside the ResNet-50 wall times.

Run: python3 benches/compile_time.py [nets]   (nets: the ResNet-50 comparison only)
"""
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "compile-time"
SIZES = (30, 200)


def shapes(i):
    # (batch, k) inputs and (n, k) weights, all distinct.
    k = 64 + 8 * i
    n = 32 + 4 * i
    return (16, k), (n, k)


def typed_source(layers):
    out = ["use blobflow::blob;", "use blobflow::typed::TypedBlob;", ""]
    for i in range(layers):
        (b, k), (n, k2) = shapes(i)
        out.append(f"blob!(shape In{i} = {b}, {k});")
        out.append(f"blob!(shape W{i} = {n}, {k2});")
    out.append("")
    for i in range(layers):
        out.append(
            f"fn layer{i}(x: &TypedBlob<f32, In{i}>, w: &TypedBlob<f32, W{i}>) -> f32 {{\n"
            f"    let y = x.inner_product(w).unwrap();\n"
            f"    let mut c = TypedBlob::<f32, In{i}>::new().unwrap();\n"
            f"    c.copy_from(x, false).unwrap();\n"
            f"    y.asum_data().unwrap() + c.asum_data().unwrap()\n"
            f"}}\n"
        )
    out.append("fn main() {\n    let mut total = 0.0;")
    for i in range(layers):
        out.append(
            f"    total += layer{i}(&TypedBlob::<f32, In{i}>::new().unwrap(), &TypedBlob::<f32, W{i}>::new().unwrap());"
        )
    out.append('    println!("{total}");\n}')
    return "\n".join(out)


def dynamic_source(layers):
    out = ["use blobflow::Blob;", "use blobflow::kernels::cpu::{gemm, Transpose};", ""]
    for i in range(layers):
        out.append(
            f"fn layer{i}(x: &Blob<f32>, w: &Blob<f32>) -> f32 {{\n"
            f"    let (b, k) = (x.shape()[0], x.shape()[1]);\n"
            f"    let (n, k2) = (w.shape()[0], w.shape()[1]);\n"
            f"    assert_eq!(k, k2, \"inner dims differ\");\n"
            f"    let y = Blob::<f32>::new(&[b, n]).unwrap();\n"
            f"    gemm(Transpose::No, Transpose::Yes, b, n, k, 1.0, &x.cpu_data().unwrap(), &w.cpu_data().unwrap(), 0.0, &mut y.mutable_cpu_data().unwrap());\n"
            f"    let mut c = Blob::<f32>::new(x.shape()).unwrap();\n"
            f"    c.copy_from(x, false, false).unwrap();\n"
            f"    y.asum_data().unwrap() + c.asum_data().unwrap()\n"
            f"}}\n"
        )
    out.append("fn main() {\n    let mut total = 0.0;")
    for i in range(layers):
        (b, k), (n, k2) = shapes(i)
        out.append(
            f"    total += layer{i}(&Blob::<f32>::new(&[{b}, {k}]).unwrap(), &Blob::<f32>::new(&[{n}, {k2}]).unwrap());"
        )
    out.append('    println!("{total}");\n}')
    return "\n".join(out)


def resnet50_layers():
    """ResNet-50 as (kind, name, bottoms, top, args), in Caffe's order and names."""
    layers = []

    def add(kind, name, bottoms, top, **args):
        layers.append((kind, name, bottoms, top, args))
        return top

    def conv_bn(x, tag, branch, cout, k, s, p):
        y = add("conv", f"res{tag}_branch{branch}", [x], f"res{tag}_branch{branch}", cout=cout, k=k, s=s, p=p)
        add("bn", f"bn{tag}_branch{branch}", [y], y)
        return add("scale", f"scale{tag}_branch{branch}", [y], y)

    x = add("conv", "conv1", ["data"], "conv1", cout=64, k=7, s=2, p=3, bias=True)
    add("bn", "bn_conv1", [x], x)
    add("scale", "scale_conv1", [x], x)
    add("relu", "conv1_relu", [x], x)
    x = add("pool", "pool1", [x], "pool1", k=3, s=2, max=True)
    for stage, (blocks, mid, out) in zip("2345", [(3, 64, 256), (4, 128, 512), (6, 256, 1024), (3, 512, 2048)]):
        for b in range(blocks):
            tag = f"{stage}{'abcdef'[b]}"
            stride = 2 if b == 0 and stage != "2" else 1
            shortcut = conv_bn(x, tag, "1", out, 1, stride, 0) if b == 0 else x
            y = conv_bn(x, tag, "2a", mid, 1, stride, 0)
            add("relu", f"res{tag}_branch2a_relu", [y], y)
            y = conv_bn(y, tag, "2b", mid, 3, 1, 1)
            add("relu", f"res{tag}_branch2b_relu", [y], y)
            y = conv_bn(y, tag, "2c", out, 1, 1, 0)
            x = add("sum", f"res{tag}", [shortcut, y], f"res{tag}")
            add("relu", f"res{tag}_relu", [x], x)
    x = add("pool", "pool5", [x], "pool5", k=7, s=1, max=False)
    x = add("fc", "fc1000", [x], "fc1000", n=1000)
    add("prob", "prob", [x], "prob")
    return layers


def typed_net_source():
    """ResNet-50 declared with NetSpec, one statement a layer (no macros)."""
    out = [
        "use blobflow::layers::net::NetState;",
        "use blobflow::layers::typed_net::*;",
        "blobflow::blob!(pub shape Image = _, 3, 224, 224);",
        "",
        "fn main() {",
        '    let mut n = NetSpec::<f32>::new("ResNet-50");',
        '    let data = n.input::<Image>("data");',
    ]
    var = {"data": "data"}
    count = 0
    for kind, name, bottoms, top, a in resnet50_layers():
        count += 1
        v = f"t{count}"
        in_place = top == bottoms[0]
        src = ("" if in_place else "&") + var[bottoms[0]]
        spec = {
            "conv": lambda: f"Conv::<{a.get('cout')}, {a.get('k')}, {a.get('s')}, {a.get('p')}>::new()"
            + ("" if a.get("bias") else ".bias_term(false)"),
            "bn": lambda: "BatchNorm::new().use_global_stats(true)",
            "scale": lambda: "Scale::with_bias()",
            "relu": lambda: "Neuron::relu()",
            "pool": lambda: f"Pool::<{a.get('k')}, {a.get('s')}>::{'max' if a.get('max') else 'ave'}()",
            "sum": lambda: "Eltwise::sum()",
            "fc": lambda: f"Fc::<{a.get('n')}>::new()",
            "prob": lambda: "Prob",
        }[kind]()
        if kind == "sum":
            src = f"(&{var[bottoms[0]]}, &{var[bottoms[1]]})"
        out.append(f'    let {v} = n.add("{name}", {src}, {spec});')
        var[top] = v
    out.append(f"    let net = n.batch(1).build(NetState::test()).unwrap();")
    out.append(f'    println!("{{}} layers, output {{:?}}", net.layer_names().count(), {var["prob"]}.blob(&net).unwrap().shape());')
    out.append("}")
    return "\n".join(out)


def prototxt_net_source():
    """The same ResNet-50 from prototxt text, checked when it runs."""
    text = ['name: "ResNet-50"', 'input: "data" input_shape { dim: 1 dim: 3 dim: 224 dim: 224 }']
    for kind, name, bottoms, top, a in resnet50_layers():
        caffe_type, fields = {
            "conv": ("Convolution", f"convolution_param {{ num_output: {a.get('cout')} kernel_size: {a.get('k')} stride: {a.get('s')} pad: {a.get('p')} bias_term: {'true' if a.get('bias') else 'false'} }}"),
            "bn": ("BatchNorm", "batch_norm_param { use_global_stats: true }"),
            "scale": ("Scale", "scale_param { bias_term: true }"),
            "relu": ("ReLU", ""),
            "pool": ("Pooling", f"pooling_param {{ pool: {'MAX' if a.get('max') else 'AVE'} kernel_size: {a.get('k')} stride: {a.get('s')} }}"),
            "sum": ("Eltwise", ""),
            "fc": ("InnerProduct", f"inner_product_param {{ num_output: {a.get('n')} }}"),
            "prob": ("Softmax", ""),
        }[kind]
        bottom = " ".join(f'bottom: "{b}"' for b in bottoms)
        text.append(f'layer {{ name: "{name}" type: "{caffe_type}" {bottom} top: "{top}" {fields} }}')
    body = "\n".join(text)
    return "\n".join([
        "use blobflow::layers::net::{Net, NetState};",
        "",
        f"const RESNET50: &str = r#\"{body}\"#;",
        "",
        "fn main() {",
        "    let net = Net::<f32>::from_prototxt(RESNET50, NetState::test()).unwrap();",
        '    println!("{} layers, output {:?}", net.layer_names().count(), net.blob("prob").unwrap().shape());',
        "}",
    ])


def make_crate(name, source):
    d = WORK / name
    (d / "src").mkdir(parents=True, exist_ok=True)
    (d / "Cargo.toml").write_text(
        f'[package]\nname = "{name}"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f'[dependencies]\nblobflow = {{ path = "{ROOT}" }}\n\n[workspace]\n'
    )
    (d / "src" / "main.rs").write_text(source)
    return d


def timed_builds(crates, target, command="build", rounds=3):
    """Each crate's build from clean, the crates built in turn each round,
    so a slow spell of the machine (its disk is shared) falls on all of
    them alike: the best wall time of each, and the median of its
    compiler's CPU time (user + system, all threads), which the VM's
    neighbours move less."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    for d in crates:
        subprocess.run(["cargo", command, "-q"], cwd=d, env=env, check=True)  # dependencies
    best = [float("inf")] * len(crates)
    cpu = [[] for _ in crates]
    for _ in range(rounds):
        for i, d in enumerate(crates):
            subprocess.run(["cargo", "clean", "-q", "-p", d.name], cwd=d, env=env, check=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.monotonic()
            subprocess.run(["cargo", command, "-q"], cwd=d, env=env, check=True)
            best[i] = min(best[i], time.monotonic() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[i].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return best, [statistics.median(c) for c in cpu]


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    target = WORK / "target"
    for layers in () if sys.argv[1:] == ["nets"] else SIZES:
        typed = make_crate(f"typed_layers_{layers}", typed_source(layers))
        dynamic = make_crate(f"dynamic_layers_{layers}", dynamic_source(layers))
        (t_dyn, t_typed), _ = timed_builds([dynamic, typed], target)
        print(f"{layers} layer functions, {2 * layers} distinct shapes, debug build of the crate alone:")
        print(f"  dynamic blobs: {t_dyn:.2f} s")
        print(f"  typed blobs:   {t_typed:.2f} s")
        print(f"  ratio typed / dynamic: {t_typed / t_dyn:.2f}")
    typed = make_crate("typed_resnet50", typed_net_source())
    dynamic = make_crate("prototxt_resnet50", prototxt_net_source())
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    for d in (typed, dynamic):
        run = subprocess.run(["cargo", "run", "-q"], cwd=d, env=env, check=True, capture_output=True, text=True)
        print(f"{d.name}: {run.stdout.strip()}")
    print(f"ResNet-50 ({len(resnet50_layers())} layers, 16 residual sums), debug build of the crate alone:")
    for command in ("build", "check"):
        (t_dyn, t_typed), (c_dyn, c_typed) = timed_builds([dynamic, typed], target, command, rounds=5)
        print(f"  cargo {command}: from prototxt text {t_dyn:.2f} s, typed net {t_typed:.2f} s, ratio {t_typed / t_dyn:.2f} (best wall time);"
              f" CPU time {c_dyn:.2f} s and {c_typed:.2f} s, ratio {c_typed / c_dyn:.2f} (median)")


if __name__ == "__main__":
    main()
