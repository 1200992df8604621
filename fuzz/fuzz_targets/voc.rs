//! `convert_annoset` on an arbitrary annotation file: the bytes are a
//! VOC XML file (where the first byte is even, as `<` is) or a TuSimple
//! lane JSON file (odd, as `{` is) beside a small PNG and a label map,
//! converted into a store. An error naming the list's line, or a store whose records
//! decode; never a panic, never more memory than the limit (256 MiB).
#![no_main]

use std::sync::Once;

use blob_data::{AnnotationKind, Backend, ImageSetOptions, convert_annoset};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static SETUP: Once = Once::new();
    let dir = std::env::temp_dir().join(format!("blobflow-fuzz-voc-{}", std::process::id()));
    SETUP.call_once(|| {
        blob_runtime::set_host_memory_limit(256 << 20);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        image::RgbImage::new(8, 6).save(dir.join("a.png")).unwrap();
        std::fs::write(dir.join("list.txt"), "a.png a.xml\n").unwrap();
        std::fs::write(
            dir.join("labelmap.prototxt"),
            r#"item { name: "none" label: 0 } item { name: "dog" label: 1 } item { name: "cat" label: 2 }"#,
        )
        .unwrap();
    });
    let Some(&choice) = data.first() else {
        return;
    };
    let kind = if choice % 2 == 0 {
        AnnotationKind::Detection
    } else {
        AnnotationKind::LaneDetection
    };
    std::fs::write(dir.join("a.xml"), data).unwrap();
    let db = dir.join("db");
    let _ = std::fs::remove_dir_all(&db);
    let root = format!("{}/", dir.display());
    match convert_annoset(
        &root,
        &dir.join("list.txt"),
        &db,
        Backend::Lmdb,
        &ImageSetOptions::default(),
        kind,
        Some(&dir.join("labelmap.prototxt")),
        false,
        &mut |_| {},
    ) {
        Ok(n) => assert_eq!(n, 1),
        Err(e) => {
            assert!(e.contains("line 1"), "{e}");
            assert!(e.len() <= 4096, "an error of {} bytes", e.len());
        }
    }
});
