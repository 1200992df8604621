//! Everything the typed API allows, built (not only checked) so that the
//! const-evaluated index checks run.
use blobflow::typed::{Dim, Dyn, TypedBlob};
use blobflow::blob;

blob!(pub shape Conv1Out = n: 64, c: 20, h: 24, w: 24);
blob!(shape Pool2Out = _, 50, 4, 4);

const OFF: usize = <blob!(f32; 2, 3, 4)>::static_offset(&[1, 2, 3]);

fn relu<B: Dim, K: Dim>(x: &blob!(f32; B, K)) {
    for v in x.mutable_cpu_data().unwrap().iter_mut() {
        *v = v.max(0.0);
    }
}

fn main() {
    assert_eq!(OFF, 23);
    assert_eq!(Conv1Out::C, 1);
    let c = TypedBlob::<f32, Conv1Out>::new().unwrap();
    let anon: blob!(f32; 64, 20, 24, 24) = c.reshape();
    let mut again = TypedBlob::<f32, Conv1Out>::new().unwrap();
    again.copy_from(&anon, false).unwrap();
    let _ = anon.data_at4::<63, 19, 23, 23>();
    let flat: blob!(f32; 64, 11520) = anon.flatten().into_shape();
    let w = <blob!(f32; 10, 11520)>::new().unwrap();
    let y: blob!(f32; 64, 10) = flat.inner_product(&w).unwrap().into_shape();
    relu(&y);
    let p = TypedBlob::<f32, Pool2Out>::with_dynamic(7).unwrap();
    let pf = p.flatten();
    let w2 = <blob!(f32; 500, 800)>::new().unwrap();
    let out: blob!(f32; _, 500) = pf.inner_product(&w2).unwrap().into_shape();
    assert_eq!(out.shape(), &[7, 500]);
    let _d: TypedBlob<f32, blobflow::typed::Shp<(Dyn, blobflow::typed::typenum::U500), (Dyn, blobflow::typed::D<500>)>> = out;
    assert_eq!(c_shape(), 6);
}

fn c_shape() -> usize {
    let a = <blob!(f32; 1, 2, 3, 4)>::new().unwrap();
    a.num() + a.channels() + a.height() - 1 + a.width() - 3
}
