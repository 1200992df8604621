//! SegNet's DenseImageData list on arbitrary text, its pairs real PNGs
//! (a colour image, its label image, and a label image of another
//! size): the list is read and, where it is whole enough, the first
//! batch decoded, resized, mirrored and cropped as the first byte
//! chooses. An error names what is wrong; nothing panics.
#![no_main]

use std::sync::OnceLock;

use blob_data::data_registry;
use blob_layers::net::Net;
use libfuzzer_sys::fuzz_target;

/// A folder of this process with `image.png` (8 x 6, colour),
/// `label.png` (8 x 6, gray) and `small.png` (5 x 6, gray).
fn folder() -> &'static std::path::Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("blobflow-fuzz-dense-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        image::RgbImage::from_fn(8, 6, |x, y| image::Rgb([x as u8 * 30, y as u8 * 40, 7]))
            .save(dir.join("image.png"))
            .unwrap();
        image::GrayImage::from_fn(8, 6, |x, y| image::Luma([(x + y) as u8 % 5]))
            .save(dir.join("label.png"))
            .unwrap();
        image::GrayImage::from_fn(5, 6, |x, _| image::Luma([x as u8]))
            .save(dir.join("small.png"))
            .unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, text)) = data.split_first() else {
        return;
    };
    let dir = folder();
    let list = dir.join(format!("list-{}.txt", std::process::id()));
    std::fs::write(&list, text).unwrap();
    let resize = if knobs & 2 != 0 { "new_height: 5 new_width: 9" } else { "" };
    let crop = match (knobs >> 2) % 4 {
        0 => "",
        1 => "crop_height: 3 crop_width: 4",
        2 => "crop_height: 7 crop_width: 2",
        _ => "crop_height: 6 crop_width: 8",
    };
    let prototxt = format!(
        r#"layer {{ name: "d" type: "DenseImageData" top: "data" top: "label"
            dense_image_data_param {{ source: "{}" root_folder: "{}/" batch_size: {}
                                      mirror: {} {resize} {crop} shuffle: {} }} }}"#,
        list.display(),
        dir.display(),
        1 + (knobs >> 4) % 3,
        knobs & 1 != 0,
        knobs & 0x40 != 0,
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
