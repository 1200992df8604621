//! WindowData's window file on arbitrary text, its images a real PNG:
//! the file is read, its windows sorted, and where it is whole enough
//! the first batch cut and warped (context, square mode, mirror and the
//! foreground share chosen by the first byte). An error names what is
//! wrong; nothing panics, and a count in the file cannot ask for
//! unbounded memory.
#![no_main]

use std::sync::OnceLock;

use blob_data::data_registry;
use blob_layers::net::Net;
use libfuzzer_sys::fuzz_target;

/// A folder of this process with a 24 x 16 PNG, `photo.png`.
fn folder() -> &'static std::path::Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("blobflow-fuzz-window-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        image::RgbImage::from_fn(24, 16, |x, y| image::Rgb([x as u8 * 9, y as u8 * 13, 77]))
            .save(dir.join("photo.png"))
            .unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, text)) = data.split_first() else {
        return;
    };
    let dir = folder();
    let windows = dir.join("windows.txt");
    std::fs::write(&windows, text).unwrap();
    let prototxt = format!(
        r#"layer {{ name: "w" type: "WindowData" top: "data" top: "label"
            transform_param {{ crop_size: 8 mirror: {} }}
            window_data_param {{ source: "{}" root_folder: "{}/" batch_size: 3
                                 fg_fraction: {} context_pad: {} crop_mode: "{}" }} }}"#,
        knobs & 1 != 0,
        windows.display(),
        dir.display(),
        f32::from((knobs >> 1) % 3) / 2.0,
        (knobs >> 3) % 4,
        if knobs & 0x20 != 0 { "square" } else { "warp" },
    );
    match Net::<f32>::builder()
        .registry(&data_registry())
        .from_prototxt(&prototxt)
    {
        Ok(mut net) => {
            if let Err(e) = net.forward() {
                assert!(!e.to_string().is_empty());
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
