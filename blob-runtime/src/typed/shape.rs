//! Shape types: a list of dims ([`DimList`], implemented for tuples of up to
//! 32 dims) with a readable name for diagnostics ([`Shape::Name`]).

use std::marker::PhantomData;
use std::ops::{Add, Mul};

use typenum::{Prod, Sum, U0, U1, Unsigned};

use super::dims::Dim;

/// A tuple of [`Dim`]s: the dims of a shape, outermost first.
///
/// ```
/// use blob_runtime::typed::{DimList, Dyn};
/// use typenum::{U1, U28};
/// type Mnist = (Dyn, U1, U28, U28);
/// assert_eq!(<Mnist as DimList>::RANK, 4);
/// assert_eq!(<Mnist as DimList>::DIMS, &[0, 1, 28, 28]);
/// assert_eq!(<Mnist as DimList>::DYNAMIC_AXIS, Some(0));
/// ```
pub trait DimList: 'static + Send + Sync {
    /// Number of axes.
    const RANK: usize;
    /// The dims; 0 stands for a dynamic dim.
    const DIMS: &'static [usize];
    /// Which axes are dynamic.
    const IS_DYNAMIC: &'static [bool];
    /// The first dynamic axis, if any.
    const DYNAMIC_AXIS: Option<usize> = first_true(Self::IS_DYNAMIC);
    /// Product of the static dims.
    const STATIC_COUNT: usize = product(Self::DIMS, Self::IS_DYNAMIC);
    /// Row-major strides when every dim is static (0 where a dynamic dim
    /// makes a stride unknown at compile time).
    const STRIDES: &'static [usize];
    /// An index into the shape: `[usize; RANK]`.
    type Index: AsRef<[usize]> + Copy;
}

const fn first_true(v: &[bool]) -> Option<usize> {
    let mut i = 0;
    while i < v.len() {
        if v[i] {
            return Some(i);
        }
        i += 1;
    }
    None
}

const fn product(dims: &[usize], dynamic: &[bool]) -> usize {
    let mut p = 1usize;
    let mut i = 0;
    while i < dims.len() {
        if !dynamic[i] {
            p = match p.checked_mul(dims[i]) {
                Some(v) => v,
                None => panic!("shape's element count overflows usize"),
            };
        }
        i += 1;
    }
    p
}

/// Element count and number of dynamic dims as typenum integers, for the
/// relations that compare shapes at compile time (reshape, share, flatten).
pub trait Counted {
    /// Product of the static dims.
    type Count: Unsigned;
    /// Number of dynamic dims.
    type DynRank: Unsigned;
}

impl Counted for () {
    type Count = U1;
    type DynRank = U0;
}

/// Row-major strides of `dims`, as a const array (any dynamic dim makes the
/// strides outside it 0).
pub const fn strides<const R: usize>(dims: &[usize], dynamic: &[bool]) -> [usize; R] {
    let mut s = [0usize; R];
    if R == 0 {
        return s;
    }
    let mut acc = 1usize;
    let mut known = true;
    let mut i = R;
    while i > 0 {
        i -= 1;
        s[i] = if known { acc } else { 0 };
        if dynamic[i] {
            known = false;
        } else {
            acc = acc.saturating_mul(dims[i]);
        }
    }
    s
}

macro_rules! count_idents {
    () => { 0usize };
    ($h:ident $($t:ident)*) => { 1usize + count_idents!($($t)*) };
}

macro_rules! counted {
    ($head:ident) => {
        impl<$head: Dim> Counted for ($head,) {
            type Count = <$head as Dim>::Static;
            type DynRank = <$head as Dim>::Dynamic;
        }
    };
    ($head:ident $(, $tail:ident)+) => {
        impl<$head: Dim $(, $tail: Dim)+> Counted for ($head, $($tail,)+)
        where
            ($($tail,)+): Counted,
            <$head as Dim>::Static: Mul<<($($tail,)+) as Counted>::Count>,
            Prod<<$head as Dim>::Static, <($($tail,)+) as Counted>::Count>: Unsigned,
            <$head as Dim>::Dynamic: Add<<($($tail,)+) as Counted>::DynRank>,
            Sum<<$head as Dim>::Dynamic, <($($tail,)+) as Counted>::DynRank>: Unsigned,
        {
            type Count = Prod<<$head as Dim>::Static, <($($tail,)+) as Counted>::Count>;
            type DynRank = Sum<<$head as Dim>::Dynamic, <($($tail,)+) as Counted>::DynRank>;
        }
    };
}

macro_rules! dim_lists {
    () => {
        impl DimList for () {
            const RANK: usize = 0;
            const DIMS: &'static [usize] = &[];
            const IS_DYNAMIC: &'static [bool] = &[];
            const STRIDES: &'static [usize] = &[];
            type Index = [usize; 0];
        }
    };
    ($head:ident $(, $tail:ident)*) => {
        impl<$head: Dim $(, $tail: Dim)*> DimList for ($head, $($tail,)*) {
            const RANK: usize = count_idents!($head $($tail)*);
            const DIMS: &'static [usize] = &[$head::VALUE $(, $tail::VALUE)*];
            const IS_DYNAMIC: &'static [bool] = &[$head::IS_DYNAMIC $(, $tail::IS_DYNAMIC)*];
            const STRIDES: &'static [usize] = &strides::<{ count_idents!($head $($tail)*) }>(
                &[$head::VALUE $(, $tail::VALUE)*],
                &[$head::IS_DYNAMIC $(, $tail::IS_DYNAMIC)*],
            );
            type Index = [usize; count_idents!($head $($tail)*)];
        }

        counted!($head $(, $tail)*);

        dim_lists!($($tail),*);
    };
}

dim_lists!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31
);

/// A shape as a type: its dims and the name diagnostics print for it.
///
/// `blob!` makes these: `blob!(f32; 64, 3, 32, 32)` uses an anonymous
/// [`Shp`] whose name is `(D<64>, D<3>, D<32>, D<32>)`, and
/// `blob!(pub shape Conv1Out = 64, 20, 24, 24)` declares a struct
/// `Conv1Out` that is its own name.
///
/// ```
/// use blob_runtime::typed::{Dim, Shape, Shp, D};
/// use typenum::{U2, U3};
/// type S = Shp<(U2, U3), (D<2>, D<3>)>;
/// assert_eq!(<S as Shape>::describe(), "2 3");
/// ```
pub trait Shape: 'static + Send + Sync {
    /// The dims.
    type Dims: DimList;
    /// What error messages print for this shape.
    type Name;
    /// A declared name (`Some("Conv1Out")`), for run-time messages.
    const DECLARED_NAME: Option<&'static str> = None;

    /// The shape in words for run-time messages: `"Conv1Out (64 20 24 24)"`,
    /// or `"_ 1 28 28"` with `_` for a dynamic dim.
    fn describe() -> String {
        let dims: Vec<String> = Self::Dims::DIMS
            .iter()
            .zip(Self::Dims::IS_DYNAMIC)
            .map(|(d, &dy)| if dy { "_".to_string() } else { d.to_string() })
            .collect();
        let dims = dims.join(" ");
        match Self::DECLARED_NAME {
            Some(n) => format!("{n} ({dims})"),
            None => dims,
        }
    }
}

/// The anonymous shape `blob!` writes: dims `L` and diagnostic name `N`.
/// Never constructed; only a type.
pub struct Shp<L, N>(PhantomData<fn() -> (L, N)>);

impl<L: DimList, N: 'static> Shape for Shp<L, N> {
    type Dims = L;
    type Name = N;
}
