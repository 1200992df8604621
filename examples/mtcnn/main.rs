//! Finds the faces in a photo with MTCNN's three Caffe nets, built from
//! the authors' `.prototxt`s through blobflow's `Net`: P-Net over an
//! image pyramid by reshaping one net, R-Net and O-Net on crops, and
//! prints each face's box, probability and five landmarks.
//!
//! ```sh
//! cargo run --release --example mtcnn
//! cargo run --release --example mtcnn -- --image photo.png
//! cargo run --release --features cuda --example mtcnn -- --device cuda
//! ```

mod detect;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Parser)]
struct Args {
    /// An RGB PNG
    #[arg(long, default_value_t = format!("{ROOT}/tests/fixtures/nets/images/astronaut.png"))]
    image: String,
    /// The folder of det1..3 .prototxt and .caffemodel
    #[arg(long, default_value_t = format!("{ROOT}/tests/fixtures/nets/mtcnn"))]
    models: String,
    /// Where to run: cpu, or cuda (builds with --features cuda)
    #[arg(long, default_value = "cpu")]
    device: String,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let image = detect::read_png(&PathBuf::from(&args.image))?;
    let mut mtcnn = detect::Mtcnn::open(&PathBuf::from(&args.models))?;
    match args.device.as_str() {
        "cpu" => println!("device: cpu"),
        #[cfg(feature = "cuda")]
        "cuda" => {
            let gpu = blobflow::runtime::cuda::CudaBackend::new(0)?;
            println!("device: {}", gpu.gpu().name());
            mtcnn.move_to(gpu)?;
        }
        other => {
            return Err(
                format!("--device {other}: cpu, or cuda in a build with --features cuda").into(),
            );
        }
    }
    let started = Instant::now();
    let faces = mtcnn.detect(&image)?;
    println!(
        "{}: {} x {}, {} face(s) in {:.1} ms",
        args.image,
        image.width,
        image.height,
        faces.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let names = ["left eye", "right eye", "nose", "mouth left", "mouth right"];
    for f in &faces {
        println!(
            "face ({:.0}, {:.0})-({:.0}, {:.0}) probability {:.7}",
            f.x1, f.y1, f.x2, f.y2, f.score
        );
        for (name, (x, y)) in names.iter().zip(f.landmarks) {
            println!("  {name:11} ({x:.1}, {y:.1})");
        }
    }
    Ok(())
}
