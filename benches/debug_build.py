#!/usr/bin/env python3
"""How fast a user's debug build runs a net, with and without the
README's profile lines.

Generates a crate outside the workspace (under target/debug-build) that
depends on blobflow by path and declares cifar10_quick as a typed net, then
times its forward and forward + backward passes at batch 100 (one thread
per core, the default) built four ways: release; debug with the README's
two profile lines; debug with only the dependencies optimized; plain
debug. Prints each against release, measured in the same run.

Run: python3 benches/debug_build.py
"""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORK = ROOT / "target" / "debug-build"

MAIN = r'''
use blobflow::layers::net::NetState;
use blobflow::layers::typed_net::*;
use std::time::Instant;

blobflow::blob!(pub shape Images = _, 3, 32, 32);
blobflow::blob!(pub shape Classes = _);

fn main() {
    let mut n = NetSpec::<f32>::new("CIFAR10_quick");
    let data = n.input::<Images>("data");
    let label = n.input::<Classes>("label");
    let g = |std| Filler::gaussian(0.0, std);
    let x = n.add("conv1", &data, Conv::<32, 5, 1, 2>::new().weight_filler(g(1e-4)));
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = n.add("relu1", x, Neuron::relu());
    let x = n.add("conv2", &x, Conv::<32, 5, 1, 2>::new().weight_filler(g(0.01)));
    let x = n.add("relu2", x, Neuron::relu());
    let x = n.add("pool2", &x, Pool::<3, 2>::ave());
    let x = n.add("conv3", &x, Conv::<64, 5, 1, 2>::new().weight_filler(g(0.01)));
    let x = n.add("relu3", x, Neuron::relu());
    let x = n.add("pool3", &x, Pool::<3, 2>::ave());
    let x = n.add("ip1", &x, Fc::<64>::new().weight_filler(g(0.1)));
    let s = n.add("ip2", &x, Fc::<10>::new().weight_filler(g(0.1)));
    n.add("loss", (&s, &label), SoftmaxLoss::new());
    let mut net = n.batch(100).build(NetState::train()).unwrap();
    net.forward().unwrap();
    let passes = 5;
    let t = Instant::now();
    for _ in 0..passes {
        net.forward().unwrap();
    }
    let forward = t.elapsed().as_secs_f64() / passes as f64;
    let t = Instant::now();
    for _ in 0..passes {
        net.forward().unwrap();
        net.backward().unwrap();
    }
    let both = t.elapsed().as_secs_f64() / passes as f64;
    println!("{:.2} {:.2}", forward * 1e3, both * 1e3);
}
'''

PROFILES = {
    "release": ("", ["--release"]),
    "debug, README's lines": (
        '[profile.dev.package."*"]\nopt-level = 3\n\n[profile.dev]\nopt-level = 1\n',
        [],
    ),
    "debug, dependencies optimized": ('[profile.dev.package."*"]\nopt-level = 3\n', []),
    "debug, plain": ("", []),
}


def run(name, profile, flags):
    d = WORK / re.sub(r"[^a-z]+", "_", name).strip("_")
    (d / "src").mkdir(parents=True, exist_ok=True)
    (d / "Cargo.toml").write_text(
        '[package]\nname = "cifar_debug"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f'[dependencies]\nblobflow = {{ path = "{ROOT}" }}\n\n[workspace]\n\n{profile}'
    )
    (d / "src" / "main.rs").write_text(MAIN)
    env = dict(os.environ, CARGO_TARGET_DIR=str(d / "target"))
    subprocess.run(["cargo", "build", "-q", *flags], cwd=d, env=env, check=True)
    out = subprocess.run(
        ["cargo", "run", "-q", *flags], cwd=d, env=env, check=True, capture_output=True, text=True
    )
    return [float(v) for v in out.stdout.split()]


def main():
    print("cifar10_quick (typed), batch 100, forward / forward + backward, ms a pass:")
    base = None
    for name, (profile, flags) in PROFILES.items():
        fwd, both = run(name, profile, flags)
        base = base or (fwd, both)
        print(
            f"  {name:32} {fwd:8.1f} / {both:8.1f}"
            f"   ({fwd / base[0]:.1f}x / {both / base[1]:.1f}x release)"
        )


if __name__ == "__main__":
    main()
