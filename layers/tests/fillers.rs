//! Caffe's fillers beyond the plain draws: `positive_unitball`, sparse
//! `gaussian` and `bilinear`, for both element types, and the errors for
//! what Caffe would refuse.

use blob_layers::filler::fill;
use blob_proto::{ParamMessage, ParamValue, schema};
use blob_runtime::{Blob, MathElement};

fn filler(kind: &str) -> ParamMessage {
    let mut param = ParamMessage::new(&schema::FILLER);
    param.set("type", ParamValue::Str(kind.into()));
    param
}

fn unitball_rows_sum_to_one<T: MathElement>() {
    let w = Blob::<T>::new(&[6, 3, 2, 2]).unwrap();
    fill(&w, &filler("positive_unitball")).unwrap();
    for row in w.cpu_data().unwrap().chunks(12) {
        assert!(row.iter().all(|&v| v >= T::ZERO));
        let sum: f64 = row.iter().map(|v| v.to_f64()).sum();
        assert!((sum - 1.0).abs() < 1e-5, "{sum}");
    }
}

#[test]
fn positive_unitball_rows_are_positive_and_sum_to_one() {
    unitball_rows_sum_to_one::<f32>();
    unitball_rows_sum_to_one::<f64>();
}

#[test]
fn a_sparse_gaussian_keeps_sparse_over_num_outputs_of_the_weights() {
    blob_kernels::cpu::set_seed(3);
    let mut param = filler("gaussian");
    param.set("std", ParamValue::Float(1.0));
    param.set("sparse", ParamValue::Int(25));
    let w = Blob::<f32>::new(&[100, 200]).unwrap();
    fill(&w, &param).unwrap();
    let kept = w.cpu_data().unwrap().iter().filter(|&&v| v != 0.0).count();
    let share = kept as f64 / 20_000.0;
    assert!((share - 0.25).abs() < 0.02, "kept {share}");
    // Without `sparse`, every weight is drawn.
    param.clear("sparse");
    fill(&w, &param).unwrap();
    assert!(w.cpu_data().unwrap().iter().all(|&v| v != 0.0));
}

#[test]
fn bilinear_needs_a_square_four_axis_kernel() {
    let err = fill(
        &Blob::<f32>::new(&[1, 1, 3, 4]).unwrap(),
        &filler("bilinear"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("square kernel") && err.contains("[1, 1, 3, 4]"),
        "{err}"
    );
    // Kernel 3 (f = 2, c = 0.5, as Caffe): the center weighs 1, a corner 1/4.
    let k = Blob::<f64>::new(&[2, 1, 3, 3]).unwrap();
    fill(&k, &filler("bilinear")).unwrap();
    let d = k.cpu_data().unwrap();
    assert_eq!(&d[..9], &d[9..]);
    assert_eq!(d[4], 1.0);
    assert_eq!(d[0], 0.25);
}

#[test]
fn an_unknown_filler_lists_the_known_ones() {
    let err = fill(&Blob::<f32>::new(&[2]).unwrap(), &filler("orthogonal"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"orthogonal\"") && err.contains("positive_unitball"),
        "{err}"
    );
}
