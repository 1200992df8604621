//! A store's record on arbitrary bytes: Datum decoding (raw, float_data,
//! encoded JPEG/PNG, each colour mode) and the transformer over what it
//! gives, with crop, mirror and mean chosen by the first byte. An error
//! says what is wrong; nothing panics, and nothing is allocated beyond
//! what a record may hold.
#![no_main]

use blob_data::{ColorMode, DataTransformer, decode_datum};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, record)) = data.split_first() else {
        return;
    };
    let mode = [ColorMode::AsStored, ColorMode::Color, ColorMode::Gray][usize::from(knobs % 3)];
    let Ok(example) = decode_datum(record, mode) else {
        return;
    };
    let count = example.channels * example.height * example.width;
    assert!(count <= 3 << 28);
    let settings = format!(
        "crop_size: {} mirror: {} scale: 0.5 {}",
        (knobs >> 2) % 4,
        knobs & 0x40 != 0,
        if knobs & 0x80 != 0 { "mean_value: 1 mean_value: 2 mean_value: 3" } else { "" }
    );
    let transformer = DataTransformer::<f32>::from_text(&settings, knobs & 0x20 != 0).unwrap();
    match transformer.output_shape(&example) {
        Ok(dims) => {
            let mut out = vec![0.0f32; dims.iter().product()];
            let mut draws = 0u32;
            let mut rand = |n: u32| {
                draws = draws.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                draws % n
            };
            transformer.transform(&example, &mut out, &mut rand).unwrap();
        }
        Err(why) => assert!(!why.is_empty()),
    }
});
