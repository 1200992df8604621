//! A generic layer's slices seen as the `f32` they are, for the kernels
//! written for `f32` alone (AVX-512 convolutions and pooling).

use std::any::TypeId;

/// `values` as `f32` when `T` is `f32`.
pub(crate) fn as_f32<T: 'static>(values: &[T]) -> Option<&[f32]> {
    (TypeId::of::<T>() == TypeId::of::<f32>())
        // SAFETY: T is f32, so the slice is one of f32.
        .then(|| unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), values.len()) })
}

/// [`as_f32`] for a slice written to.
pub(crate) fn as_f32_mut<T: 'static>(values: &mut [T]) -> Option<&mut [f32]> {
    (TypeId::of::<T>() == TypeId::of::<f32>())
        // SAFETY: T is f32, so the slice is one of f32.
        .then(|| unsafe {
            std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), values.len())
        })
}

/// `f32` values seen as the `T` they are, where `T` is `f32`.
pub(crate) fn f32_as<T: 'static>(values: &[f32]) -> Option<&[T]> {
    (TypeId::of::<T>() == TypeId::of::<f32>())
        // SAFETY: T is f32, so the slice is one of T.
        .then(|| unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), values.len()) })
}

/// [`f32_as`] for a slice written to.
pub(crate) fn f32_as_mut<T: 'static>(values: &mut [f32]) -> Option<&mut [T]> {
    (TypeId::of::<T>() == TypeId::of::<f32>())
        // SAFETY: T is f32, so the slice is one of T.
        .then(|| unsafe {
            std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), values.len())
        })
}
