//! The user's program trains its 20-layer net, its own typed layer in
//! it, and the loss falls; `--time` prints two positive timings.

use std::process::Command;

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_downstream-typed-user"))
        .args(args)
        .output()
        .expect("run the user's program");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_users_net_trains() {
    let line = run(&[]);
    let numbers: Vec<f32> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    let [first, last, steps] = numbers[..] else {
        panic!("{line}");
    };
    assert_eq!(steps, 10.0, "{line}");
    assert!(last < first, "{line}");
}

#[test]
fn the_timing_mode_prints_two_timings() {
    let line = run(&["--time"]);
    let ms: Vec<f64> = line.split(' ').map(|w| w.parse().unwrap()).collect();
    assert!(ms.len() == 2 && ms[0] > 0.0 && ms[1] > ms[0], "{line}");
}
