//! SegNet's DenseImageData in nets: image and label image pairs from a
//! list, the label plane's values untouched, nearest-pixel resizing of
//! labels, a mirror and crop that move both alike, and the errors a bad
//! list, pair or setting gets.

use std::path::{Path, PathBuf};

use blob_data::data_registry;
use blob_layers::net::{Net, NetState};
use blob_runtime::BlobError;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-dense-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gray(dir: &Path, name: &str, width: u32, height: u32, value: impl Fn(u32, u32) -> u8) {
    image::GrayImage::from_fn(width, height, |x, y| image::Luma([value(x, y)]))
        .save(dir.join(name))
        .unwrap();
}

fn dense_net(dir: &Path, list: &str, param: &str, transform: &str) -> Result<Net<f32>, BlobError> {
    let path = dir.join("list.txt");
    std::fs::write(&path, list).unwrap();
    let text = format!(
        r#"layer {{ name: "pairs" type: "DenseImageData" top: "data" top: "label"
            transform_param {{ {transform} }}
            dense_image_data_param {{ source: "{}" root_folder: "{}/" {param} }} }}"#,
        path.display(),
        dir.display()
    );
    Net::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
}

fn values(net: &Net<f32>, blob: &str) -> Vec<f32> {
    net.blob(blob).unwrap().to_vec().unwrap()
}

#[test]
fn pairs_give_bgr_images_and_their_label_planes_unscaled() {
    let dir = scratch("pairs");
    for (name, base) in [("a", 10u8), ("b", 40)] {
        image::RgbImage::from_fn(4, 3, |x, y| {
            image::Rgb([base, base + x as u8, base + y as u8])
        })
        .save(dir.join(format!("{name}.png")))
        .unwrap();
        gray(&dir, &format!("{name}_label.png"), 4, 3, |x, y| {
            base / 10 + (y * 4 + x) as u8
        });
    }
    let list = "a.png a_label.png\n\nb.png b_label.png\n";
    let mut net = dense_net(&dir, list, "batch_size: 2", "scale: 0.5").unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [2, 3, 3, 4]);
    assert_eq!(net.blob("label").unwrap().shape(), [2, 1, 3, 4]);
    let data = values(&net, "data");
    // Item 0's blue plane is (10 + y) / 2; item 1's red plane 40 / 2.
    assert_eq!(data[..4], [5.0; 4]);
    assert_eq!(data[8..12], [6.0; 4]);
    assert_eq!(data[36 + 24..][..12], [20.0; 12]);
    let label = values(&net, "label");
    let want: Vec<f32> = (0..12)
        .map(|i| 1.0 + i as f32)
        .chain((0..12).map(|i| 4.0 + i as f32))
        .collect();
    assert_eq!(label, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resized_labels_take_their_nearest_pixel() {
    let dir = scratch("nearest");
    image::RgbImage::from_pixel(2, 2, image::Rgb([9, 9, 9]))
        .save(dir.join("a.png"))
        .unwrap();
    gray(&dir, "a_label.png", 2, 2, |x, y| (y * 2 + x) as u8);
    let list = "a.png a_label.png\n";
    let mut net = dense_net(&dir, list, "batch_size: 1 new_height: 4 new_width: 4", "").unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [1, 3, 4, 4]);
    let want = [
        0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 2.0, 2.0, 3.0, 3.0,
    ];
    assert_eq!(values(&net, "label"), want);
    // Shrunk by an uneven ratio: still only the label image's values,
    // at OpenCV's floor(x * 5 / 3).
    gray(&dir, "a_label.png", 5, 2, |x, y| (10 * y + x) as u8);
    image::RgbImage::from_pixel(5, 2, image::Rgb([9, 9, 9]))
        .save(dir.join("a.png"))
        .unwrap();
    let mut net = dense_net(&dir, list, "batch_size: 1 new_height: 2 new_width: 3", "").unwrap();
    net.forward().unwrap();
    assert_eq!(values(&net, "label"), [0.0, 1.0, 3.0, 10.0, 11.0, 13.0]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mirror_and_crop_move_the_image_and_its_label_alike() {
    let dir = scratch("mirror-crop");
    // The image is its label image: any move of one alone shows.
    let value = |x: u32, y: u32| (y * 6 + x) as u8;
    gray(&dir, "a.png", 6, 5, value);
    gray(&dir, "a_label.png", 6, 5, value);
    let list = "a.png a_label.png\n";
    let param = "batch_size: 4 is_color: false mirror: true crop_height: 3 crop_width: 2";
    let mut net = dense_net(&dir, list, param, "").unwrap();
    let (mut windows, mut mirrored, mut unmirrored) = (Vec::new(), 0, 0);
    for _ in 0..8 {
        net.forward().unwrap();
        assert_eq!(net.blob("data").unwrap().shape(), [4, 1, 3, 2]);
        let (data, label) = (values(&net, "data"), values(&net, "label"));
        assert_eq!(data, label);
        for item in label.chunks(6) {
            // Rows 6 apart, each two neighbours in one order or the other.
            assert_eq!(item[2] - item[0], 6.0, "{item:?}");
            match item[1] - item[0] {
                1.0 => unmirrored += 1,
                -1.0 => mirrored += 1,
                step => panic!("columns {step} apart: {item:?}"),
            }
            let left = item[0].min(item[1]);
            if !windows.contains(&left) {
                windows.push(left);
            }
        }
    }
    assert!(
        mirrored > 0 && unmirrored > 0,
        "{mirrored} mirrored, {unmirrored} not"
    );
    assert!(windows.len() > 4, "crops at {windows:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ENet's `label_divide_factor`: labels at its encoder's resolution,
/// resized from the label image by their nearest pixel.
#[test]
fn enets_label_divide_factor_shrinks_the_labels_alone() {
    let dir = scratch("divide");
    gray(&dir, "a.png", 8, 4, |x, _| x as u8);
    gray(&dir, "a_label.png", 8, 4, |x, y| (10 * y + x) as u8);
    let list = "a.png a_label.png\n";
    let param = "batch_size: 2 is_color: false new_height: 4 new_width: 8 label_divide_factor: 2 \
                 mirror: true";
    let mut net = dense_net(&dir, list, param, "").unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [2, 1, 4, 8]);
    assert_eq!(net.blob("label").unwrap().shape(), [2, 1, 2, 4]);
    let (data, label) = (values(&net, "data"), values(&net, "label"));
    for (image, labels) in data.chunks(32).zip(label.chunks(8)) {
        // Every other row and column (shrunk, then mirrored with the
        // image or not, as the fork flips what it read).
        let want: [f32; 8] = if image[0] == 0.0 {
            [0.0, 2.0, 4.0, 6.0, 20.0, 22.0, 24.0, 26.0]
        } else {
            [6.0, 4.0, 2.0, 0.0, 26.0, 24.0, 22.0, 20.0]
        };
        assert_eq!(labels, want, "{image:?}");
    }
    let err = |param: &str| dense_net(&dir, list, param, "").err().unwrap().to_string();
    let e = err("batch_size: 1 label_divide_factor: 2");
    assert!(
        e.contains("divides new_height and new_width: give them too"),
        "{e}"
    );
    let e = err(
        "batch_size: 1 new_height: 4 new_width: 8 label_divide_factor: 2 crop_height: 2 crop_width: 2",
    );
    assert!(e.contains("crop one or the other"), "{e}");
    let e = err("batch_size: 1 new_height: 4 new_width: 8 label_divide_factor: 5");
    assert!(e.contains("leaves no label pixel"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn batches_of_one_take_each_images_size() {
    let dir = scratch("sizes");
    gray(&dir, "a.png", 3, 2, |_, _| 1);
    gray(&dir, "a_label.png", 3, 2, |_, _| 2);
    gray(&dir, "b.png", 5, 4, |_, _| 1);
    gray(&dir, "b_label.png", 5, 4, |_, _| 2);
    let list = "a.png a_label.png\nb.png b_label.png\n";
    let mut net = dense_net(&dir, list, "batch_size: 1 is_color: false", "").unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("label").unwrap().shape(), [1, 1, 2, 3]);
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [1, 1, 4, 5]);
    assert_eq!(net.blob("label").unwrap().shape(), [1, 1, 4, 5]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_settings_lists_and_pairs_are_named() {
    let dir = scratch("bad");
    gray(&dir, "a.png", 4, 4, |_, _| 1);
    gray(&dir, "a_label.png", 4, 4, |_, _| 2);
    gray(&dir, "small_label.png", 3, 4, |_, _| 2);
    let good = "a.png a_label.png\n";
    let err =
        |list: &str, param: &str, transform: &str| match dense_net(&dir, list, param, transform)
            .and_then(|mut net| net.forward())
        {
            Ok(_) => panic!("{list:?} {param:?} {transform:?} ran"),
            Err(e) => e.to_string(),
        };
    let e = err(good, "batch_size: 1", "mirror: true");
    assert!(
        e.contains("would move the image but not its label image"),
        "{e}"
    );
    let e = err(good, "batch_size: 1", "crop_size: 2");
    assert!(e.contains("crop_height / crop_width"), "{e}");
    let e = err(good, "batch_size: 1 crop_height: 2", "");
    assert!(
        e.contains("crop_height and crop_width must be given together"),
        "{e}"
    );
    let e = err(good, "batch_size: 0", "");
    assert!(e.contains("batch_size must be at least 1"), "{e}");
    // A size no image may have is refused before any memory is asked for.
    let e = err(
        good,
        "batch_size: 1 new_height: 4000000 new_width: 4000000",
        "",
    );
    assert!(e.contains("more than the 16384 pixels a side"), "{e}");
    let e = err("a.png a_label.png\na.png\n", "batch_size: 1", "");
    assert!(
        e.contains("list.txt, line 2: \"a.png\" is not 2 names"),
        "{e}"
    );
    let e = err("a.png small_label.png\n", "batch_size: 1", "");
    assert!(
        e.contains("line 1 (a.png small_label.png): its image is 4 x 4 but its label image 4 x 3"),
        "{e}"
    );
    let e = err(good, "batch_size: 1 crop_height: 5 crop_width: 2", "");
    assert!(e.contains("5 x 2 is larger than its 4 x 4 image"), "{e}");
    let e = err("a.png missing_label.png\n", "batch_size: 1", "");
    assert!(
        e.contains("Could not load") && e.contains("missing_label.png"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
