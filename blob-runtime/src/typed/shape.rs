//! Shape types: a tuple of dims is a shape ([`DimList`], up to 32 dims),
//! and `blob!(shape Name = ..)` declares a named one; both implement
//! [`Shape`].

use std::marker::PhantomData;
use std::ops::{Add, Mul};

use typenum::{Prod, Sum, U0, U1, Unsigned};

use super::dims::{D, Dim, Dyn, StaticDim, Thousands};
use super::twin::Twin;

/// A tuple of [`Dim`]s: the dims of a shape, outermost first. Every such
/// tuple is also an anonymous [`Shape`], the one `blob!(f32; ..)` writes.
///
/// ```
/// use blob_runtime::typed::{D, DimList, Dyn};
/// type Mnist = (Dyn, D<1>, D<28>, D<28>);
/// assert_eq!(<Mnist as DimList>::RANK, 4);
/// assert_eq!(<Mnist as DimList>::STATIC_DIMS, &[None, Some(1), Some(28), Some(28)]);
/// assert_eq!(<Mnist as DimList>::DYNAMIC_AXIS, Some(0));
/// ```
pub trait DimList: 'static + Send + Sync {
    /// Number of axes.
    const RANK: usize;
    /// Each dim's value when known at compile time, `None` for [`Dyn`].
    const STATIC_DIMS: &'static [Option<usize>];
    /// The first dynamic axis, if any.
    const DYNAMIC_AXIS: Option<usize> = first_dynamic(Self::STATIC_DIMS);
    /// Product of the static dims: the whole element count when every dim
    /// is static, the count per unit of the dynamic dim otherwise.
    const ITEM_COUNT: usize = product(Self::STATIC_DIMS);
    /// Row-major strides (0 where a dynamic dim makes a stride unknown at
    /// compile time).
    const STRIDES: &'static [usize];
    /// An index into the shape: `[usize; RANK]`.
    type Index: AsRef<[usize]> + Copy;
    /// The dim of axis 0 (`D<1>` for a 0-axis list, as Caffe counts a
    /// scalar).
    type First: Dim;
    /// The dim of the last axis (`D<1>` for a 0-axis list).
    type Last: Dim;
}

const fn first_dynamic(v: &[Option<usize>]) -> Option<usize> {
    let mut i = 0;
    while i < v.len() {
        if v[i].is_none() {
            return Some(i);
        }
        i += 1;
    }
    None
}

const fn product(dims: &[Option<usize>]) -> usize {
    let mut p = 1usize;
    let mut i = 0;
    while i < dims.len() {
        if let Some(d) = dims[i] {
            p = match p.checked_mul(d) {
                Some(v) => v,
                None => panic!("a shape's element count overflows usize"),
            };
        }
        i += 1;
    }
    p
}

/// Row-major strides of `dims`, as a const array (a dynamic dim makes the
/// strides outside it 0).
///
/// ```
/// let s = blob_runtime::typed::strides::<3>(&[Some(2), Some(3), Some(4)]);
/// assert_eq!(s, [12, 4, 1]);
/// ```
pub const fn strides<const R: usize>(dims: &[Option<usize>]) -> [usize; R] {
    let mut s = [0usize; R];
    let mut acc = 1usize;
    let mut known = true;
    let mut i = R;
    while i > 0 {
        i -= 1;
        s[i] = if known { acc } else { 0 };
        match dims[i] {
            Some(d) => acc = acc.saturating_mul(d),
            None => known = false,
        }
    }
    s
}

/// A shape as a type: its dims, and what messages print for its element
/// count.
///
/// A tuple of dims is an anonymous shape (`(D<64>, D<3>)`, what
/// `blob!(f32; 64, 3)` writes); `blob!(pub shape Conv1Out = _, 20, 24, 24)`
/// declares a named one, which diagnostics call `Conv1Out`.
///
/// ```
/// use blob_runtime::typed::{D, Dyn, Shape};
/// assert_eq!(<(D<2>, D<3>) as Shape>::describe(), "2 3");
/// assert_eq!(<(Dyn, D<3>) as Shape>::describe(), "_ 3");
/// ```
#[diagnostic::on_unimplemented(
    message = "{Self} is not a shape",
    label = "expected a shape here",
    note = "a shape is a tuple of dims (`(Dyn, D<8>)`) or a name declared with `blob!(shape Name = _, 8)`; `blob!(f32; _, 8)` is a blob type, `TypedBlob<f32, (Dyn, D<8>)>`"
)]
pub trait Shape: 'static + Send + Sync {
    /// The dims.
    type Dims: DimList;
    /// The element count in the form compile-time relations compare:
    /// [`Counted`] when the count is known at compile time.
    type Counts;
    /// What messages print for the count: `D<11520>` for a named shape,
    /// [`CountOf`] the dims for an anonymous one.
    type CountName;
    /// A declared name (`Some("Conv1Out")`), for run-time messages.
    const DECLARED_NAME: Option<&'static str> = None;

    /// The shape in words for run-time messages: `"Conv1Out (_ 20 24 24)"`,
    /// or `"_ 1 28 28"` with `_` for a dynamic dim.
    fn describe() -> String {
        let dims: Vec<String> = Self::Dims::STATIC_DIMS
            .iter()
            .map(|d| d.map_or_else(|| "_".to_string(), |d| d.to_string()))
            .collect();
        let dims = dims.join(" ");
        match Self::DECLARED_NAME {
            Some(n) => format!("{n} ({dims})"),
            None => dims,
        }
    }
}

/// A shape's element count and number of dynamic dims as typenum integers,
/// for the relations that compare counts at compile time (reshape, share).
pub trait Counted {
    /// Product of the static dims.
    type Count: Unsigned;
    /// Number of dynamic dims.
    type DynRank: Unsigned;
}

/// The counts `blob!` computes for a named shape: any size.
pub struct CountedAs<Count, DynRank>(PhantomData<fn() -> (Count, DynRank)>);

impl<C: Unsigned, R: Unsigned> Counted for CountedAs<C, R> {
    type Count = C;
    type DynRank = R;
}

/// How messages name the element count of an anonymous shape: the count of
/// those dims.
pub struct CountOf<Dims>(PhantomData<fn() -> Dims>);

/// A dim as a factor of an element count: its twin, or 1 for [`Dyn`] (which
/// counts as a dynamic dim instead).
pub trait CountFactor: Dim {
    /// The factor.
    type Factor: Unsigned;
    /// 1 for [`Dyn`], 0 otherwise.
    type Dynamic: Unsigned;
}

impl<const N: usize> CountFactor for D<N>
where
    D<N>: Twin,
{
    type Factor = <D<N> as Twin>::T;
    type Dynamic = U0;
}

impl<Hi, Lo> CountFactor for Thousands<Hi, Lo>
where
    Thousands<Hi, Lo>: Twin,
{
    type Factor = <Thousands<Hi, Lo> as Twin>::T;
    type Dynamic = U0;
}

impl CountFactor for Dyn {
    type Factor = U1;
    type Dynamic = U1;
}

impl Counted for () {
    type Count = U1;
    type DynRank = U0;
}

/// Every dim is static: the shape can be made without run-time dims.
#[diagnostic::on_unimplemented(
    message = "{Self} has a dynamic dim: make it with `with_dynamic(n)` or `from_shape(..)`",
    label = "needs its dynamic dim's value"
)]
pub trait StaticShape: Shape {}

#[diagnostic::do_not_recommend]
impl<S: Shape> StaticShape for S where S::Dims: AllStatic {}

/// Dim lists whose every dim is static.
pub trait AllStatic {}
impl AllStatic for () {}

/// The dims of a two-axis list, for relations on matrices.
#[diagnostic::on_unimplemented(
    message = "{Self} does not have 2 axes",
    label = "expected a shape of 2 axes"
)]
pub trait Rank2 {
    /// Axis 0.
    type A0: Dim;
    /// Axis 1.
    type A1: Dim;
}

impl<A: Dim, B: Dim> Rank2 for (A, B) {
    type A0 = A;
    type A1 = B;
}

/// The dims of a four-axis list (N, C, H, W), for relations on images.
#[diagnostic::on_unimplemented(
    message = "{Self} does not have 4 axes",
    label = "expected a shape of 4 axes (N, C, H, W)"
)]
pub trait Rank4 {
    /// Axis 0.
    type A0: Dim;
    /// Axis 1.
    type A1: Dim;
    /// Axis 2.
    type A2: Dim;
    /// Axis 3.
    type A3: Dim;
}

impl<A: Dim, B: Dim, C: Dim, E: Dim> Rank4 for (A, B, C, E) {
    type A0 = A;
    type A1 = B;
    type A2 = C;
    type A3 = E;
}

macro_rules! count_idents {
    () => { 0usize };
    ($h:ident $($t:ident)*) => { 1usize + count_idents!($($t)*) };
}

macro_rules! last {
    ($only:ident) => { $only };
    ($head:ident $($tail:ident)+) => { last!($($tail)+) };
}

macro_rules! counted {
    ($head:ident) => {
        impl<$head: CountFactor> Counted for ($head,) {
            type Count = $head::Factor;
            type DynRank = $head::Dynamic;
        }
    };
    ($head:ident $(, $tail:ident)+) => {
        impl<$head: CountFactor $(, $tail: Dim)+> Counted for ($head, $($tail,)+)
        where
            ($($tail,)+): Counted,
            $head::Factor: Mul<<($($tail,)+) as Counted>::Count>,
            Prod<$head::Factor, <($($tail,)+) as Counted>::Count>: Unsigned,
            $head::Dynamic: Add<<($($tail,)+) as Counted>::DynRank>,
            Sum<$head::Dynamic, <($($tail,)+) as Counted>::DynRank>: Unsigned,
        {
            type Count = Prod<$head::Factor, <($($tail,)+) as Counted>::Count>;
            type DynRank = Sum<$head::Dynamic, <($($tail,)+) as Counted>::DynRank>;
        }
    };
}

macro_rules! dim_lists {
    () => {
        impl DimList for () {
            const RANK: usize = 0;
            const STATIC_DIMS: &'static [Option<usize>] = &[];
            const STRIDES: &'static [usize] = &[];
            type Index = [usize; 0];
            type First = D<1>;
            type Last = D<1>;
        }

        impl Shape for () {
            type Dims = ();
            type Counts = ();
            type CountName = CountOf<()>;
        }
    };
    ($head:ident $(, $tail:ident)*) => {
        impl<$head: Dim $(, $tail: Dim)*> DimList for ($head, $($tail,)*) {
            const RANK: usize = count_idents!($head $($tail)*);
            const STATIC_DIMS: &'static [Option<usize>] = &[$head::STATIC $(, $tail::STATIC)*];
            const STRIDES: &'static [usize] = &strides::<{ count_idents!($head $($tail)*) }>(
                &[$head::STATIC $(, $tail::STATIC)*],
            );
            type Index = [usize; count_idents!($head $($tail)*)];
            type First = $head;
            type Last = last!($head $($tail)*);
        }

        impl<$head: Dim $(, $tail: Dim)*> Shape for ($head, $($tail,)*) {
            type Dims = Self;
            type Counts = Self;
            type CountName = CountOf<Self>;
        }

        impl<$head: StaticDim $(, $tail: StaticDim)*> AllStatic for ($head, $($tail,)*) {}


        counted!($head $(, $tail)*);

        dim_lists!($($tail),*);
    };
}

dim_lists!(
    A0, A1, A2, A3, A4, A5, A6, A7, A8, A9, A10, A11, A12, A13, A14, A15, A16, A17, A18, A19, A20,
    A21, A22, A23, A24, A25, A26, A27, A28, A29, A30, A31
);
