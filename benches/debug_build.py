#!/usr/bin/env python3
"""What a user's crate costs to rebuild, and how fast its debug build runs
a net, with and without the README's profile lines.

Copies the user crate `tests/downstream/typed-user` (a typed layer of its
own in a 20-layer typed net) outside the workspace, under
target/debug-build, depending on blobflow by path, as a user's crate
would: its own profiles, not this workspace's. Built four ways (release;
debug with the README's two profile lines; debug with only the
dependencies optimized; plain debug), each:

- times the net's forward and forward + backward passes at batch 100
  (one thread per core, the default), against release in the same run;
- makes a one-line edit of `main.rs` and times the rebuild: wall seconds
  and CPU seconds (user + system, of cargo and every compiler it runs).

Run: python3 benches/debug_build.py
"""
import os
import pathlib
import re
import resource
import shutil
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATE = ROOT / "tests" / "downstream" / "typed-user"
WORK = ROOT / "target" / "debug-build"

PROFILES = {
    "release": ("", ["--release"]),
    "debug, README's lines": (
        '[profile.dev.package."*"]\nopt-level = 3\n\n[profile.dev]\nopt-level = 1\n',
        [],
    ),
    "debug, dependencies optimized": ('[profile.dev.package."*"]\nopt-level = 3\n', []),
    "debug, plain": ("", []),
}

# The edit: one string literal of main.rs, changed back and forth.
EDIT = ("after 10 steps", "after ten steps")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def setup(name, profile):
    d = WORK / re.sub(r"[^a-z]+", "_", name).strip("_")
    (d / "src").mkdir(parents=True, exist_ok=True)
    for source in (CRATE / "src").glob("*.rs"):
        shutil.copy(source, d / "src" / source.name)
    (d / "Cargo.toml").write_text(
        '[package]\nname = "typed_user"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n'
        f'[dependencies]\nblobflow = {{ path = "{ROOT}" }}\n\n[workspace]\n\n{profile}'
    )
    shutil.copy(ROOT / "rust-toolchain.toml", d / "rust-toolchain.toml")
    return d


def build(d, flags, env):
    subprocess.run(["cargo", "build", "-q", *flags], cwd=d, env=env, check=True)


def rebuild(d, flags, env):
    """Wall and CPU seconds of the build after a one-line edit."""
    main = d / "src" / "main.rs"
    text = main.read_text()
    old, new = EDIT if EDIT[0] in text else EDIT[::-1]
    main.write_text(text.replace(old, new, 1))
    cpu, wall = children_cpu(), time.monotonic()
    build(d, flags, env)
    return time.monotonic() - wall, children_cpu() - cpu


def run(name, profile, flags):
    d = setup(name, profile)
    env = dict(os.environ, CARGO_TARGET_DIR=str(d / "target"))
    build(d, flags, env)
    wall, cpu = rebuild(d, flags, env)
    out = subprocess.run(
        ["cargo", "run", "-q", *flags, "--", "--time"],
        cwd=d,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    fwd, both = (float(v) for v in out.stdout.split())
    return fwd, both, wall, cpu


def main():
    print(
        "tests/downstream/typed-user (20 layers, one the crate's own), batch 100,"
        f" {os.cpu_count()} cores:"
    )
    print("  forward / forward + backward, ms a pass; rebuild after a one-line edit")
    base = None
    for name, (profile, flags) in PROFILES.items():
        fwd, both, wall, cpu = run(name, profile, flags)
        base = base or (fwd, both)
        print(
            f"  {name:32} {fwd:8.1f} / {both:8.1f}"
            f"   ({fwd / base[0]:4.1f}x / {both / base[1]:4.1f}x release)"
            f"   rebuild {wall:5.1f} s, {cpu:5.1f} CPU s"
        )


if __name__ == "__main__":
    main()
