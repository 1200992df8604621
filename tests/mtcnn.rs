//! The MTCNN example's cascade finds the one face of the astronaut photo
//! where a peer run (OpenCV's Caffe importer, the same cascade) finds it:
//! box about (182, 61)-(270, 175), probability 0.9999995, landmarks
//! within a few pixels (resampling details move them by a pixel or two).

#[path = "../examples/mtcnn/detect.rs"]
#[allow(dead_code)]
mod detect;

use std::path::Path;

#[test]
fn the_astronauts_face_and_landmarks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nets");
    let image = detect::read_png(&root.join("images/astronaut.png")).unwrap();
    assert_eq!((image.width, image.height), (512, 512));
    let mut mtcnn = detect::Mtcnn::open(&root.join("mtcnn")).unwrap();
    let faces = mtcnn.detect(&image).unwrap();
    assert_eq!(faces.len(), 1, "{faces:?}");
    let f = &faces[0];
    let near = |got: f64, want: f64, what: &str| {
        assert!(
            (got - want).abs() <= 4.0,
            "{what}: {got} vs the peer's {want}"
        );
    };
    for (got, want, what) in [
        (f.x1, 182.0, "x1"),
        (f.y1, 61.0, "y1"),
        (f.x2, 270.0, "x2"),
        (f.y2, 175.0, "y2"),
    ] {
        near(got, want, what);
    }
    assert!(f.score > 0.999, "{}", f.score);
    let peer = [
        (204.8, 100.3),
        (247.7, 103.1),
        (225.3, 128.2),
        (201.8, 139.9),
        (246.0, 142.4),
    ];
    for ((x, y), (px, py)) in f.landmarks.iter().zip(peer) {
        near(*x, px, "landmark x");
        near(*y, py, "landmark y");
    }
}

#[test]
fn an_image_without_a_face_gives_none() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nets");
    let flat = detect::Image {
        width: 64,
        height: 48,
        pixels: vec![128.0; 64 * 48 * 3],
    };
    let mut mtcnn = detect::Mtcnn::open(&root.join("mtcnn")).unwrap();
    assert!(mtcnn.detect(&flat).unwrap().is_empty());
}
