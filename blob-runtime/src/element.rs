//! The element types a blob can hold.

use std::fmt::Debug;

use blob_kernels::Real;

use crate::device::Precision;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
}

/// A type a [`crate::Blob`] can store: `f32`, `f64`, `i32` or `u32`, as in
/// Caffe's instantiations.
///
/// ```
/// fn name<T: blob_runtime::Element>() -> &'static str { T::NAME }
/// assert_eq!(name::<u32>(), "u32");
/// ```
pub trait Element:
    sealed::Sealed + bytemuck::Pod + Default + Debug + PartialEq + Send + Sync + 'static
{
    /// The type's name as Rust spells it.
    const NAME: &'static str;
}

/// An element blobs can do math on: `f32` or `f64`. Integer blobs are
/// storage only: calling `update` or `asum_data` on a `Blob<i32>` does not
/// compile (Caffe fails at run time with "Not Implemented Yet").
///
/// ```compile_fail
/// let b = blob_runtime::Blob::<i32>::new(&[3]).unwrap();
/// b.asum_data(); // no math on integer blobs
/// ```
pub trait MathElement: Element + Real {
    /// Precision for device math calls.
    const PRECISION: Precision;
}

macro_rules! element {
    ($t:ty) => {
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
        }
    };
}
element!(f32);
element!(f64);
element!(i32);
element!(u32);

impl MathElement for f32 {
    const PRECISION: Precision = Precision::F32;
}
impl MathElement for f64 {
    const PRECISION: Precision = Precision::F64;
}
