//! Each reader's peak memory on the hostile files of its kind: files of a
//! few bytes per item declaring millions of layers, history blobs or
//! fields, which took gigabytes before the readers counted what they
//! hold. Every case here is measured as the growth of the process's peak
//! resident memory (`VmHWM`, reset through `/proc/self/clear_refs`)
//! during the read alone, the input already in memory, and must stay
//! within 4x the input plus a fixed allowance for the allocator's own
//! arenas. One test, so that no other test allocates meanwhile.
//!
//! `cargo test --test reader_memory -- --nocapture` prints the figures.

use blobflow::CaffeModel;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::solver::SolverFile;
use blobflow::proto::{SolverState, TextMessage, decode_message};

/// What the allocator may keep beyond the data (arenas, page rounding).
const ALLOWANCE: usize = 8 << 20;

fn kib_field(status: &str, field: &str) -> Option<usize> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse::<usize>().ok()
}

/// The growth of peak resident memory while `read` runs, in bytes.
fn peak_growth(read: impl FnOnce()) -> usize {
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak (Linux 4.0 and later)");
    let status = || std::fs::read_to_string("/proc/self/status").unwrap();
    let before = kib_field(&status(), "VmRSS:").unwrap();
    read();
    let peak = kib_field(&status(), "VmHWM:").unwrap();
    peak.saturating_sub(before) * 1024
}

/// A length-delimited field 100 (`NetParameter.layer`) `n` times, empty.
fn empty_layers(n: usize) -> Vec<u8> {
    [0xa2, 0x06, 0x00].repeat(n)
}

type Read = Box<dyn FnOnce() -> bool>;

/// The cases: what, the input's size, and the read (true: read as
/// expected). Made on demand, in the process that measures it.
fn case(index: usize) -> Option<(&'static str, usize, Read)> {
    let (what, input, read): (&str, usize, Read) = match index {
        0 => {
            let bytes = empty_layers(100_000);
            let n = bytes.len();
            (
                ".caffemodel, 100,000 empty layers (read: the layer limit)",
                n,
                Box::new(move || CaffeModel::from_bytes(&bytes).is_ok()),
            )
        }
        1 | 2 => {
            let bytes = empty_layers(if index == 1 { 1_000_000 } else { 10_000_000 });
            let n = bytes.len();
            (
                if index == 1 {
                    ".caffemodel, 1,000,000 empty layers (refused)"
                } else {
                    ".caffemodel, 10,000,000 empty layers (refused)"
                },
                n,
                Box::new(move || CaffeModel::from_bytes(&bytes).is_err()),
            )
        }
        3 => {
            let mut bytes = vec![0x08, 0x01];
            bytes.extend([0x1a, 0x00].repeat(10_000_000));
            let n = bytes.len();
            (
                ".solverstate, 10,000,000 empty history blobs (refused)",
                n,
                Box::new(move || decode_message::<SolverState>("SolverState", &bytes).is_err()),
            )
        }
        4 => {
            let text = "layer {}\n".repeat(190_000);
            let n = text.len();
            (
                "prototxt, 190,000 `layer {}` (read: the field limit)",
                n,
                Box::new(move || TextMessage::parse(&text).is_ok()),
            )
        }
        5 => {
            let text = "layer {}\n".repeat(1_000_000);
            let n = text.len();
            (
                "net prototxt, 1,000,000 `layer {}` (refused)",
                n,
                Box::new(move || Net::<f32>::from_prototxt(&text, NetState::test()).is_err()),
            )
        }
        6 => {
            let text = "base_lr: 0.01 ".repeat(8_000_000);
            let n = text.len();
            (
                "solver prototxt, one line of 8,000,000 fields (refused)",
                n,
                Box::new(move || SolverFile::<f32>::parse(&text).is_err()),
            )
        }
        7 | 8 => {
            // 100 layers of 99,000 empty blobs (field 7) or bottoms
            // (field 3): once 1.8 GB and 565 MB for these 19.8 MB.
            let field = if index == 7 { 0x3a } else { 0x1a };
            let mut body = vec![0x0a, 0x01, b'l'];
            body.extend([field, 0x00].repeat(99_000));
            let mut layer = vec![0xa2, 0x06];
            let mut len = body.len();
            while len >= 0x80 {
                layer.push((len as u8) | 0x80);
                len >>= 7;
            }
            layer.push(len as u8);
            layer.extend_from_slice(&body);
            let bytes = layer.repeat(100);
            let n = bytes.len();
            (
                if index == 7 {
                    ".caffemodel, 100 layers of 99,000 empty blobs (refused)"
                } else {
                    ".caffemodel, 100 layers of 99,000 empty bottoms (refused)"
                },
                n,
                Box::new(move || CaffeModel::from_bytes(&bytes).is_err()),
            )
        }
        _ => return None,
    };
    Some((what, input, read))
}

/// Under a limit rather than in proportion: what the layer or field limit
/// lets a file of tiny items take at most.
const AT_A_LIMIT: usize = 48 << 20;

#[test]
#[cfg(target_os = "linux")]
fn every_reader_holds_at_most_four_times_its_input() {
    const CASE: &str = "READER_MEMORY_CASE";
    if let Ok(index) = std::env::var(CASE) {
        // A child: one case in a fresh process, measured.
        let (what, input, read) = case(index.parse().unwrap()).unwrap();
        let mut outcome = false;
        let growth = peak_growth(|| outcome = read());
        assert!(outcome, "{what}: not read as expected");
        println!("MEASURED {input} {growth}");
        return;
    }
    let mut over = Vec::new();
    for index in 0.. {
        let Some((what, ..)) = case(index) else { break };
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "every_reader_holds_at_most_four_times_its_input",
                "--nocapture",
            ])
            .env(CASE, index.to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{what}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix("MEASURED "))
            .expect("a measure");
        let [input, growth]: [usize; 2] = line
            .split(' ')
            .map(|v| v.parse().unwrap())
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        println!(
            "{what}: input {:.1} MB, peak growth {:.1} MB ({:.2}x)",
            input as f64 / 1e6,
            growth as f64 / 1e6,
            growth as f64 / input as f64
        );
        let bound = if what.contains("limit)") {
            AT_A_LIMIT
        } else {
            4 * input + ALLOWANCE
        };
        if growth > bound {
            over.push(format!("{what}: {growth} bytes for {input}, bound {bound}"));
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}
