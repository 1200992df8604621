#!/usr/bin/env python3
"""Compile-time cost of typed blobs.

Generates two crates with the same program, N layer functions over 2N
distinct shapes (N = 30, then a generated 200-layer net): one on typed blobs (`blob!` shapes, shape relations
checked by the compiler), one on dynamic `Blob<f32>` (checked at run time).
Builds blobflow once, then times a debug build of each crate alone, from
clean (dependencies excluded), best of three.

Run: python3 benches/compile_time.py
"""
import os
import pathlib
import shutil
import subprocess
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


def make_crate(name, source):
    d = WORK / name
    (d / "src").mkdir(parents=True, exist_ok=True)
    (d / "Cargo.toml").write_text(
        f'[package]\nname = "{name}"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f'[dependencies]\nblobflow = {{ path = "{ROOT}" }}\n\n[workspace]\n'
    )
    (d / "src" / "main.rs").write_text(source)
    return d


def timed_build(d, target):
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    subprocess.run(["cargo", "build", "-q"], cwd=d, env=env, check=True)  # dependencies
    best = float("inf")
    for _ in range(3):
        subprocess.run(["cargo", "clean", "-q", "-p", d.name], cwd=d, env=env, check=True)
        t = time.monotonic()
        subprocess.run(["cargo", "build", "-q"], cwd=d, env=env, check=True)
        best = min(best, time.monotonic() - t)
    return best


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    target = WORK / "target"
    for layers in SIZES:
        typed = make_crate(f"typed_layers_{layers}", typed_source(layers))
        dynamic = make_crate(f"dynamic_layers_{layers}", dynamic_source(layers))
        t_dyn = timed_build(dynamic, target)
        t_typed = timed_build(typed, target)
        print(f"{layers} layer functions, {2 * layers} distinct shapes, debug build of the crate alone:")
        print(f"  dynamic blobs: {t_dyn:.2f} s")
        print(f"  typed blobs:   {t_typed:.2f} s")
        print(f"  ratio typed / dynamic: {t_typed / t_dyn:.2f}")


if __name__ == "__main__":
    main()
