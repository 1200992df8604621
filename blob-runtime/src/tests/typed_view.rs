//! `Blob::as_typed`: a typed view of a borrowed blob is the blob itself
//! (its one `unsafe` cast, run under miri in CI).

use crate::Blob;
use crate::typed::{D, Dyn};

#[test]
fn a_view_reads_and_writes_the_blob_it_borrows() {
    let b = Blob::<f32>::from_vec(&[2, 3], (0..6).map(|v| v as f32).collect()).unwrap();
    let view = b.as_typed::<(Dyn, D<3>)>().unwrap();
    assert!(std::ptr::eq(view.as_dyn(), &b));
    assert_eq!(view.data_at([1, 0]), 3.0);
    view.mutable_cpu_data().unwrap()[view.offset([0, 2])] = 9.0;
    assert_eq!(b.to_vec().unwrap()[2], 9.0);
    b.mutable_cpu_diff().unwrap()[4] = -1.0;
    assert_eq!(view.diff_at([1, 1]), -1.0);
}

#[test]
fn a_view_of_the_wrong_shape_is_refused_with_both_shapes() {
    let b = Blob::<f64>::new(&[2, 3, 4]).unwrap();
    let rank = b.as_typed::<(Dyn, D<12>)>().unwrap_err().to_string();
    assert!(
        rank.contains("2 3 4 (24)") && rank.contains("_ 12"),
        "{rank}"
    );
    assert!(rank.contains("3 axes, the type has 2"), "{rank}");
    let dim = b.as_typed::<(D<2>, D<3>, D<5>)>().unwrap_err().to_string();
    assert!(dim.contains("dim 2 is 4, the type says 5"), "{dim}");
}
