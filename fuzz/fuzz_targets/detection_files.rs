//! The SSD fork's test-set files as DetectionOutput's save_output_param
//! and DetectionEvaluate read them: the bytes after the first are a
//! `name_size_file` (first byte even) or a label map (odd), the other
//! file a good one; the net detects and evaluates two batches, saving
//! VOC result files. An error naming the file, or files written; never
//! a panic.
#![no_main]

use std::sync::Once;

use blob_layers::net::{Net, NetState};
use libfuzzer_sys::fuzz_target;

const SIZES: &str = "img1 100 200\nimg2 50 50\n";
const LABELS: &str = "item { name: 'background' label: 0 } item { name: 'cat' label: 1 } item { name: 'dog' label: 2 }";

fuzz_target!(|data: &[u8]| {
    static SETUP: Once = Once::new();
    let dir = std::env::temp_dir().join(format!("blobflow-fuzz-detection-{}", std::process::id()));
    SETUP.call_once(|| {
        blob_runtime::set_host_memory_limit(256 << 20);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
    });
    let Some((&which, file)) = data.split_first() else {
        return;
    };
    let (sizes, labels) = (dir.join("sizes.txt"), dir.join("labels.prototxt"));
    let (fuzzed, good, good_text) = if which % 2 == 0 {
        (&sizes, &labels, LABELS)
    } else {
        (&labels, &sizes, SIZES)
    };
    std::fs::write(fuzzed, file).unwrap();
    std::fs::write(good, good_text).unwrap();
    let text = format!(
        r#"input: "loc" input_shape {{ dim: 1 dim: 8 }}
           input: "conf" input_shape {{ dim: 1 dim: 6 }}
           input: "prior" input_shape {{ dim: 1 dim: 2 dim: 8 }}
           input: "label" input_shape {{ dim: 1 dim: 1 dim: 1 dim: 8 }}
           layer {{ name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"
                   detection_output_param {{ num_classes: 3 nms_param {{ nms_threshold: 0.45 }}
                     save_output_param {{ output_directory: "{out}" output_name_prefix: "comp4_"
                       output_format: "VOC" label_map_file: "{labels}" name_size_file: "{sizes}" }} }} }}
           layer {{ name: "eval" type: "DetectionEvaluate" bottom: "det" bottom: "label" top: "eval"
                   detection_evaluate_param {{ num_classes: 3 name_size_file: "{sizes}" }} }}"#,
        out = dir.join("out").display(),
        labels = labels.display(),
        sizes = sizes.display(),
    );
    let mut net = match Net::<f32>::from_prototxt(&text, NetState::test()) {
        Ok(net) => net,
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("sizes.txt") || e.contains("labels.prototxt"), "{e}");
            assert!(e.len() <= 4096, "an error of {} bytes", e.len());
            return;
        }
    };
    let fill = |net: &Net<f32>, name: &str, v: &[f32]| {
        net.blob(name).unwrap().mutable_cpu_data().unwrap().copy_from_slice(v)
    };
    fill(&net, "conf", &[0.1, 0.8, 0.1, 0.2, 0.3, 0.5]);
    fill(&net, "prior", &[0.0, 0.0, 0.4, 0.4, 0.5, 0.5, 1.0, 1.0, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2]);
    fill(&net, "label", &[0.0, 1.0, 0.0, 0.0, 0.0, 0.4, 0.4, 0.0]);
    for _ in 0..2 {
        net.forward().unwrap();
    }
});
