//! Caffe file speed and memory.
//!
//! 1. A 100M-float blob: encode (ToProto + serialize) and decode (parse +
//!    FromProto), GB/s of payload. Caffe on this machine: 0.53 GB/s writing,
//!    1.3 GB/s reading.
//! 2. Peak memory of opening a ~400 MB .caffemodel and loading every layer
//!    into blobs, as a multiple of the file size, measured in a child
//!    process from its peak resident set (VmHWM).
//!
//! Run: `cargo bench --bench proto`

use std::hint::black_box;
use std::time::Instant;

use blobflow::proto::{
    BlobProto, BlobProtoView, LayerParameter, NetParameter, decode_message, encode_message,
};
use blobflow::runtime::{Blob, CaffeModel};

const N: usize = 100_000_000;

fn best_of(reps: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..reps).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn speed() {
    let blob = Blob::<f32>::new(&[N / 1000, 1000]).unwrap();
    for (i, v) in blob.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v = (i % 977) as f32 * 0.001;
    }
    let payload = (N * 4) as f64;
    let mut bytes = Vec::new();
    // The direct paths: serialize from the blob's memory, parse into it.
    let enc = best_of(3, || {
        let t = Instant::now();
        bytes = blob.to_proto_bytes(false).unwrap();
        t.elapsed().as_secs_f64()
    });
    let dec = best_of(3, || {
        let t = Instant::now();
        let mut b = Blob::<f32>::default();
        b.load_proto_view(&BlobProtoView::parse(&bytes).unwrap(), true)
            .unwrap();
        black_box(&b);
        t.elapsed().as_secs_f64()
    });
    // Through an owned BlobProto message (two copies each way).
    let enc_owned = best_of(3, || {
        let t = Instant::now();
        let p = blob.to_proto(false).unwrap();
        black_box(encode_message("BlobProto", &p).unwrap());
        t.elapsed().as_secs_f64()
    });
    let dec_owned = best_of(3, || {
        let t = Instant::now();
        let p: BlobProto = decode_message("BlobProto", &bytes).unwrap();
        black_box(Blob::<f32>::from_proto(&p).unwrap());
        t.elapsed().as_secs_f64()
    });
    println!("100M-float blob ({:.0} MB payload):", payload / 1e6);
    println!(
        "  encode (to_proto_bytes):            {:>6.2} GB/s  (Caffe ToProto + serialize: 0.53)",
        payload / enc / 1e9
    );
    println!(
        "  decode (BlobProtoView + load):      {:>6.2} GB/s  (Caffe parse + FromProto: 1.30)",
        payload / dec / 1e9
    );
    println!(
        "  encode via owned BlobProto:         {:>6.2} GB/s",
        payload / enc_owned / 1e9
    );
    println!(
        "  decode via owned BlobProto:         {:>6.2} GB/s",
        payload / dec_owned / 1e9
    );
}

fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Child mode: open the model, load every layer into blobs, report the
/// peak resident set above what the process had before.
fn measure_read(path: &str) {
    let before = peak_rss_bytes();
    let model = CaffeModel::open(path).unwrap();
    let names: Vec<String> = model.layers().map(|l| l.name().to_string()).collect();
    let mut loaded = Vec::new();
    for n in &names {
        loaded.push(model.layer_blobs::<f32>(n).unwrap());
    }
    drop(model);
    black_box(&loaded);
    println!("{}", peak_rss_bytes().saturating_sub(before));
}

fn memory() {
    let path = std::env::temp_dir().join("blobflow-bench-model.caffemodel");
    let mut net = NetParameter::new("big");
    for i in 0..10 {
        let b = Blob::<f32>::new(&[1000, 10_000]).unwrap();
        b.mutable_cpu_data().unwrap().fill(i as f32);
        net.push_layer(LayerParameter::new(
            &format!("ip{i}"),
            "InnerProduct",
            vec![b.to_proto(false).unwrap()],
        ));
    }
    std::fs::write(&path, net.encode_to_vec().unwrap()).unwrap();
    drop(net);
    let size = std::fs::metadata(&path).unwrap().len();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--measure-read", path.to_str().unwrap()])
        .output()
        .unwrap();
    let peak: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    println!(
        "reading a {:.0} MB .caffemodel into blobs:",
        size as f64 / 1e6
    );
    println!(
        "  peak memory {:.0} MB = {:.2}x the file (target <= 2.2x)",
        peak as f64 / 1e6,
        peak as f64 / size as f64
    );
    let _ = std::fs::remove_file(path);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--measure-read") {
        measure_read(&args[i + 1]);
        return;
    }
    speed();
    memory();
}
