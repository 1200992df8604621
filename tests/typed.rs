//! Typed blobs at run time: constants, dynamic dims checked once, the
//! conversions to and from dynamic blobs, and that a typed blob is the
//! runtime blob (same memory, every runtime method).

use blobflow::prelude::*;
use blobflow::typed::{Shape, TypedBlob};

blob!(pub shape Conv1Out = n: 64, c: 20, h: 24, w: 24);
blob!(shape Mnist = _, 1, 28, 28);

const OFFSET: usize = <blob!(f32; 64, 20, 24, 24)>::static_offset(&[1, 2, 3, 4]);
const STRIDE_C: usize = TypedBlob::<f32, Conv1Out>::STRIDES[1];

#[test]
fn offset_and_strides_are_constants() {
    // Evaluated at compile time: these are `const` items.
    assert_eq!(OFFSET, ((20 + 2) * 24 + 3) * 24 + 4);
    assert_eq!(STRIDE_C, 24 * 24);
    assert_eq!(TypedBlob::<f32, Conv1Out>::COUNT, 64 * 20 * 24 * 24);
    assert_eq!(TypedBlob::<f32, Conv1Out>::RANK, 4);
    assert_eq!(
        TypedBlob::<f32, Conv1Out>::STATIC_DIMS,
        &[Some(64), Some(20), Some(24), Some(24)]
    );
    // Axis indices and dim values under names that say which.
    assert_eq!((Conv1Out::AXIS_C, Conv1Out::DIM_C), (1, 20));
    assert_eq!(TypedBlob::<f32, Mnist>::ITEM_COUNT, 784);
    let b = TypedBlob::<f32, Conv1Out>::new().unwrap();
    assert_eq!(b.offset([1, 2, 3, 4]), OFFSET);
    assert_eq!(b.offset([1, 2, 3, 4]), b.as_dyn().offset(&[1, 2, 3, 4]));
}

#[test]
fn dynamic_dims_are_checked_once_when_made() {
    let x = TypedBlob::<f32, Mnist>::with_dynamic(10).unwrap();
    assert_eq!(x.shape(), &[10, 1, 28, 28]);
    assert_eq!(x.offset([9, 0, 27, 27]), 10 * 784 - 1);
    let y = TypedBlob::<f32, Mnist>::from_shape(&[3, 1, 28, 28]).unwrap();
    assert_eq!(y.count(), 3 * 784);
    let err = TypedBlob::<f32, Mnist>::from_shape(&[3, 3, 28, 28]).unwrap_err();
    assert!(err.to_string().contains("Mnist (_ 1 28 28)"), "{err}");
    assert!(
        <blob!(f32; 2, 3)>::with_dynamic(4).is_err(),
        "no dynamic dim to fill"
    );
}

#[test]
#[should_panic(expected = "index [10, 0, 0, 0] out of bounds for blob with shape 10 1 28 28")]
fn a_dynamic_index_out_of_bounds_panics_with_the_shape() {
    let x = TypedBlob::<f32, Mnist>::with_dynamic(10).unwrap();
    x.offset([10, 0, 0, 0]);
}

#[test]
fn try_into_static_names_both_shapes() {
    let dynamic = Blob::<f32>::new(&[64, 20, 24, 25]).unwrap();
    let err = dynamic.try_into_static::<Conv1Out>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot use a blob of shape 64 20 24 25 (768000) as Conv1Out (64 20 24 24): dim 3 is 25, the type says 24"
    );
    let ok = Blob::<f32>::new(&[5, 1, 28, 28])
        .unwrap()
        .try_into_static::<Mnist>()
        .unwrap();
    assert_eq!(ok.shape()[0], 5);
    assert_eq!(<Mnist as Shape>::describe(), "Mnist (_ 1 28 28)");
}

#[test]
fn a_typed_blob_is_the_runtime_blob() {
    let t = TypedBlob::<f32, Conv1Out>::new().unwrap();
    t.mutable_cpu_data().unwrap()[7] = 3.0;
    let mem = std::sync::Arc::as_ptr(t.data());
    let d = t.into_dyn();
    assert_eq!(
        std::sync::Arc::as_ptr(d.data()),
        mem,
        "into_dyn moves, never copies"
    );
    assert_eq!(d.data_at(&[0, 0, 0, 7]), 3.0);
    let back = d.try_into_static::<Conv1Out>().unwrap();
    // Runtime methods through Deref: update, asum, heads, proto.
    back.mutable_cpu_diff().unwrap()[7] = 1.0;
    back.update().unwrap();
    assert_eq!(back.asum_data().unwrap(), 2.0);
    assert_eq!(back.data_head(), Head::AtCpu);
    assert_eq!(back.to_proto(false).unwrap().data.len(), back.count());
}

#[test]
fn reshape_flatten_and_inner_product_keep_memory_and_values() {
    let x = <blob!(f32; 2, 2, 3)>::new().unwrap();
    for (i, v) in x.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v = i as f32;
    }
    let mem = std::sync::Arc::as_ptr(x.data());
    let flat: blob!(f32; 2, 6) = x.flatten().into_shape();
    assert_eq!(std::sync::Arc::as_ptr(flat.data()), mem);
    assert_eq!(flat.data_at2::<1, 5>(), 11.0);
    let w = <blob!(f32; 1, 6)>::new().unwrap();
    w.mutable_cpu_data().unwrap().fill(1.0);
    let y = flat.inner_product(&w).unwrap();
    assert_eq!(&*y.cpu_data().unwrap(), &[15.0, 51.0]);
    let back: blob!(f32; 12) = flat.reshape();
    assert_eq!(back.data_at([11]), 11.0);
}

/// Dims above 4096 (`Thousands`): the literal `blob!` writes and the one
/// compile-time arithmetic computes are one type, and their values, counts
/// and strides are the number's. AlexNet's and VGG's flattened pool5.
#[test]
fn dims_above_4096_have_counts_and_arithmetic() {
    use blobflow::typed::{D, Plus, SameAs, StaticDim, TWIN_MAX, Thousands, Times};
    fn same<A: SameAs<B>, B>() {}
    // The macro's threshold is the table's end.
    assert_eq!(TWIN_MAX, 4096);
    same::<<blob!(f32; 4096) as HasDims>::Dims, (D<4096>,)>();
    same::<<blob!(f32; 4097) as HasDims>::Dims, (Thousands<D<4>, D<97>>,)>();
    same::<Times<D<64>, D<64>>, D<4096>>();
    same::<Plus<D<4096>, D<1>>, Thousands<D<4>, D<97>>>();
    // Past a million the thousands are themselves in thousands.
    same::<Times<Thousands<D<25>, D<88>>, D<1000>>, <blob!(f32; 25088000) as HasDims>::First>();
    assert_eq!(
        <Thousands<Thousands<D<25>, D<88>>, D<0>> as StaticDim>::VALUE,
        25_088_000
    );

    let vgg = <blob!(f32; _, 512, 7, 7)>::with_dynamic(2).unwrap();
    for (i, v) in vgg.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v = i as f32;
    }
    let flat: blob!(f32; _, 25088) = vgg.flatten().into_shape();
    assert_eq!(flat.shape(), &[2, 25088]);
    assert_eq!(flat.data_at([1, 25087]), (2 * 25088 - 1) as f32);
    let alex: blob!(f32; 2, 9216) = <blob!(f32; 2, 256, 6, 6)>::new().unwrap().reshape();
    assert_eq!(<blob!(f32; 2, 9216)>::COUNT, 18432);
    assert_eq!(<blob!(f32; 2, 9216)>::STRIDES, &[9216, 1]);
    assert_eq!(alex.count(), 18432);
    let w = <blob!(f32; 3, 9216)>::new().unwrap();
    let y: blob!(f32; 2, 3) = alex.inner_product(&w).unwrap();
    assert_eq!(y.shape(), &[2, 3]);
}

/// The dims of a typed blob type, for the type equalities above.
trait HasDims {
    type Dims;
    type First;
}

impl<S: Shape> HasDims for TypedBlob<f32, S> {
    type Dims = S::Dims;
    type First = <S::Dims as blobflow::typed::DimList>::First;
}
