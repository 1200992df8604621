//! WindowData against what real Caffe's layer wrote for the same windows
//! (`tests/fixtures/caffe-window-data`), its sampling and mirroring, and
//! the errors a bad window file gets.

use std::path::{Path, PathBuf};

use blob_data::data_registry;
use blob_layers::net::{Net, NetState};
use blob_runtime::BlobError;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/caffe-window-data")
}

fn floats(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The WindowData layers of the fixture's net, their files found in the
/// fixture's folder (Caffe ran there), without the HDF5Output layers
/// that saved Caffe's tops.
fn fixture_layers() -> Vec<(String, String)> {
    let dir = fixture();
    let text = std::fs::read_to_string(dir.join("net.prototxt")).unwrap();
    let dir = format!("{}/", dir.display());
    text.split("\nlayer ")
        .filter(|layer| layer.contains("\"WindowData\""))
        .map(|layer| {
            let name = layer.split('"').nth(1).unwrap().to_string();
            let layer = layer
                .replace("source: \"", &format!("source: \"{dir}"))
                .replace("mean_file: \"", &format!("mean_file: \"{dir}"))
                .replace(
                    "window_data_param {",
                    &format!("window_data_param {{ root_folder: \"{dir}\""),
                );
            (name, format!("layer {layer}"))
        })
        .collect()
}

#[test]
fn windows_are_cut_warped_and_padded_as_caffe_cuts_them() {
    let layers = fixture_layers();
    assert_eq!(layers.len(), 4, "the fixture's four layers");
    for (name, text) in layers {
        let mut net = Net::<f32>::builder()
            .registry(&data_registry())
            .from_prototxt(&text)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        net.forward().unwrap();
        let ours = net.blob(&name).unwrap();
        assert_eq!(ours.shape(), [2, 3, 32, 32], "{name}");
        let theirs = floats(&fixture().join(format!("{name}.data.f32")));
        let ours = ours.to_vec().unwrap();
        let worst = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert_eq!(
            worst, 0.0,
            "{name}: values differ from Caffe's by up to {worst}"
        );
        let labels = net
            .blob(&format!("{name}_label"))
            .unwrap()
            .to_vec()
            .unwrap();
        assert_eq!(
            labels,
            floats(&fixture().join(format!("{name}.label.f32"))),
            "{name}"
        );
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-window-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A net of one WindowData layer over `windows` (the window file's text)
/// in `dir`, whose images are the fixture's photo.
fn window_net(
    dir: &Path,
    windows: &str,
    params: &str,
    transform: &str,
) -> Result<Net<f32>, BlobError> {
    std::fs::copy(fixture().join("photo.png"), dir.join("photo.png")).unwrap();
    std::fs::write(dir.join("windows.txt"), windows).unwrap();
    let text = format!(
        r#"layer {{ name: "w" type: "WindowData" top: "data" top: "label"
            transform_param {{ {transform} }}
            window_data_param {{ source: "{0}/windows.txt" root_folder: "{0}/" {params} }} }}"#,
        dir.display()
    );
    Net::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
}

const WINDOWS: &str = "# 0\nphoto.png\n3\n120\n160\n4\n\
    3 0.9 30 20 61 51\n7 0.6 90 40 121 71\n0 0.2 0 0 31 31\n4 0.45 5 5 36 36\n";

#[test]
fn batches_draw_background_first_then_foreground_in_the_fraction_asked() {
    let dir = scratch("sampling");
    let mut net = window_net(
        &dir,
        WINDOWS,
        "batch_size: 8 fg_fraction: 0.25",
        "crop_size: 32",
    )
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        net.forward().unwrap();
        let labels = net.blob("label").unwrap().to_vec().unwrap();
        // floor(8 * 0.25) = 2 foreground windows, after 6 background ones;
        // the window of overlap 0.45 is neither (between the thresholds).
        assert_eq!(labels[..6], [0.0; 6]);
        for &l in &labels[6..] {
            assert!(l == 3.0 || l == 7.0, "{labels:?}");
            seen.insert(l as i32);
        }
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [3, 7]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mirrored_windows_are_the_flips_of_the_unmirrored_ones() {
    let dir = scratch("mirror");
    let windows = "# 0\nphoto.png\n3\n120\n160\n2\n3 0.9 30 20 61 51\n0 0.1 0 0 31 31\n";
    let plain = {
        let mut net = window_net(
            &dir,
            windows,
            "batch_size: 2 fg_fraction: 0.5",
            "crop_size: 32",
        )
        .unwrap();
        net.forward().unwrap();
        net.blob("data").unwrap().to_vec().unwrap()
    };
    let mut net = window_net(
        &dir,
        windows,
        "batch_size: 16 fg_fraction: 0.5",
        "crop_size: 32 mirror: true",
    )
    .unwrap();
    net.forward().unwrap();
    let data = net.blob("data").unwrap().to_vec().unwrap();
    let item = 3 * 32 * 32;
    let flip = |v: &[f32]| -> Vec<f32> {
        v.chunks(32)
            .flat_map(|row| row.iter().rev().copied())
            .collect()
    };
    let mut mirrored = 0;
    for (i, got) in data.chunks(item).enumerate() {
        // Background windows first (the plain batch's item 0), then
        // foreground ones (its item 1).
        let want = if i < 8 {
            &plain[..item]
        } else {
            &plain[item..]
        };
        if got == want {
            continue;
        }
        assert_eq!(
            got,
            flip(want),
            "item {i} is neither the window nor its mirror"
        );
        mirrored += 1;
    }
    assert!(mirrored > 0 && mirrored < 16, "{mirrored} of 16 mirrored");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_window_files_and_settings_are_refused_naming_what_is_wrong() {
    let dir = scratch("errors");
    let ok = "batch_size: 2";
    let crop = "crop_size: 32";
    let cases: [(&str, &str, &str, &str); 10] = [
        ("", ok, crop, "the window file is empty"),
        (
            "# 1\nphoto.png\n3 120 160 0\n",
            ok,
            crop,
            "line 1: image index 1 where 0 was expected",
        ),
        ("# 0\nphoto.png\n1 120 160 0\n", ok, crop, "line 3: image"),
        (
            "# 0\nphoto.png\n3 120 160 2\n0 0.9 0 0 9 9\n",
            ok,
            crop,
            "line 4: a foreground window",
        ),
        (
            "# 0\nphoto.png\n3 120 160 1\n3 0.9 0 0 9\n",
            ok,
            crop,
            "the file ends where a window's y2",
        ),
        (
            "# 0\nphoto.png\n3 120 160 1\n3 0.9 0 0 9 9\n",
            ok,
            crop,
            "has no background window",
        ),
        (
            WINDOWS,
            "batch_size: 2 crop_mode: \"fit\"",
            crop,
            "crop_mode \"fit\"",
        ),
        (
            WINDOWS,
            ok,
            "crop_size: 32 scale: 0.5",
            "window_data_param.scale",
        ),
        (WINDOWS, ok, "", "needs transform_param.crop_size"),
        (
            WINDOWS,
            "batch_size: 2 context_pad: 16",
            crop,
            "context_pad 16 leaves nothing",
        ),
    ];
    for (windows, params, transform, expected) in cases {
        let err = window_net(&dir, windows, params, transform)
            .err()
            .unwrap_or_else(|| panic!("{expected}: accepted"))
            .to_string();
        assert!(err.contains(expected), "{expected:?} not in: {err}");
    }
    // A window outside its image stops the pass that needs it, naming the
    // window file's line and the image.
    let outside = "# 0\nphoto.png\n3 120 160 2\n3 0.9 100 100 199 199\n0 0.1 0 0 9 9\n";
    let err = match window_net(&dir, outside, "batch_size: 2 fg_fraction: 0.5", crop) {
        Ok(mut net) => net.forward().unwrap_err(),
        Err(e) => e,
    }
    .to_string();
    assert!(
        err.contains("line 4") && err.contains("photo.png") && err.contains("outside the image"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
