//! The Data layer alone: images/s of batches made from an LMDB of
//! 256 x 256 JPEG records (ImageNet's stored size) cropped to 227 with
//! mirrors, and of raw 28 x 28 records, on 1 decoding thread (Caffe's
//! one) and on as many as the machine has, in the same run. What a
//! training net's forward pass waits for when the queue runs dry.
//!
//! Run: cargo bench -p blob-data --bench prefetch

use std::time::Instant;

use blob_data::{Backend, StoreWriter, data_registry, set_decoding_threads};
use blob_layers::net::{Net, NetState};
use prost::Message;

fn jpeg_record(i: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(256, 256, |x, y| {
        let v = (x * 7 + y * 3 + i * 11) % 256;
        image::Rgb([v as u8, ((x ^ y) + i) as u8, (y + i * 5) as u8])
    });
    let mut jpeg = Vec::new();
    img.write_to(
        &mut std::io::Cursor::new(&mut jpeg),
        image::ImageFormat::Jpeg,
    )
    .unwrap();
    blob_proto::Datum {
        data: Some(jpeg),
        encoded: Some(true),
        label: Some(i as i32 % 1000),
        ..Default::default()
    }
    .encode_to_vec()
}

fn raw_record(i: u32) -> Vec<u8> {
    blob_proto::Datum {
        channels: Some(1),
        height: Some(28),
        width: Some(28),
        data: Some((0..784).map(|k| (k as u32 * 13 + i) as u8).collect()),
        label: Some(i as i32 % 10),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Images/s over `batches` forward passes of a net holding only the
/// Data layer (after one pass that fills the queue's first batch).
fn rate(
    source: &std::path::Path,
    transform: &str,
    batch: usize,
    batches: usize,
    threads: usize,
) -> f64 {
    set_decoding_threads(threads);
    let text = format!(
        r#"layer {{ name: "d" type: "Data" top: "data" top: "label"
            transform_param {{ {transform} }}
            data_param {{ source: "{}" batch_size: {batch} backend: LMDB }} }}"#,
        source.display()
    );
    let mut net = Net::<f32>::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
        .unwrap();
    net.forward().unwrap();
    let start = Instant::now();
    for _ in 0..batches {
        net.forward().unwrap();
    }
    (batch * batches) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let dir = std::env::temp_dir().join(format!("blobflow-bench-prefetch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let make = |name: &str, n: u32, record: fn(u32) -> Vec<u8>| {
        let path = dir.join(name);
        let mut w = StoreWriter::create(&path, Backend::Lmdb).unwrap();
        for i in 0..n {
            w.put(format!("{i:08}").as_bytes(), &record(i)).unwrap();
        }
        w.finish().unwrap();
        path
    };
    let jpegs = make("jpeg_lmdb", 256, jpeg_record);
    let raws = make("raw_lmdb", 4096, raw_record);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    println!(
        "Data layer alone, TRAIN, images/s (1 decoding thread, as Caffe; {cores} threads; ratio)"
    );
    for (what, source, transform, batch, batches) in [
        (
            "JPEG 256x256 -> crop 227, mirror, batch 64",
            &jpegs,
            "crop_size: 227 mirror: true mean_value: 104 mean_value: 117 mean_value: 123",
            64,
            12,
        ),
        (
            "raw 28x28, scale, batch 64",
            &raws,
            "scale: 0.00390625",
            64,
            400,
        ),
    ] {
        let one = rate(source, transform, batch, batches, 1);
        let many = rate(source, transform, batch, batches, cores);
        println!("{what:<48} {one:>10.0} {many:>10.0} {:>6.2}x", many / one);
    }
    set_decoding_threads(0);
    std::fs::remove_dir_all(&dir).unwrap();
}
