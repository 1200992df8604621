//! The shapes of a typed layer's bottoms, tops or parameter blobs as one
//! type: a tuple of up to four shapes, `()` for none.

use std::sync::Arc;

use blob_runtime::typed::{DimList, Shape, ShapeError, StaticShape, TypedBlob};
use blob_runtime::{Blob, Element, MathElement};

use crate::typed_net::Top;

/// A tuple of shapes: `()`, `(A,)`, `(A, B)`, `(A, B, C)` or
/// `(A, B, C, D)`, each a [`Shape`] (`(Dyn, D<16>)`, a declared name).
/// What a [`TypedLayer`](super::TypedLayer) declares for its bottoms,
/// tops and parameters, and what its passes receive as typed views.
///
/// ```
/// use blob_layers::typed_layer::BlobShapes;
/// use blob_runtime::typed::{D, Dyn};
/// type Pair = ((Dyn, D<4>), (D<4>,));
/// assert_eq!(<Pair as BlobShapes>::LEN, 2);
/// assert_eq!(<Pair as BlobShapes>::describe(), "(_ 4), (4)");
/// ```
#[diagnostic::on_unimplemented(
    message = "{Self} is not a list of blob shapes",
    label = "expected a tuple of shapes",
    note = "a typed layer's bottoms, tops and parameters are tuples of up to four shapes: `()`, `(Features,)`, `((Dyn, D<16>), Classes)`"
)]
pub trait BlobShapes: 'static {
    /// How many blobs.
    const LEN: usize;
    /// The blobs as typed views: `(&TypedBlob<T, A>, &TypedBlob<T, B>)`
    /// for `(A, B)`.
    type Views<'a, T: Element + 'a>: Copy;
    /// Handles on the blobs in a typed net of `T`: [`Top<T, A>`](Top) for `(A,)`,
    /// a tuple of them for more.
    type Tops<T: MathElement>;
    /// Each shape's static dims (`None` for the run-time one).
    fn dims() -> Vec<&'static [Option<usize>]>;
    /// The shapes, as messages write them: `(_ 16), (_)`.
    fn describe() -> String;
    /// The blobs viewed with these shapes; the first that disagrees is an
    /// error with its position. `blobs` holds [`LEN`](Self::LEN) blobs.
    #[doc(hidden)]
    fn views<'a, T: Element>(blobs: &[&'a Blob<T>]) -> Result<Self::Views<'a, T>, Mismatch>;
    /// The handles on tops named `names` of the spec `spec`.
    #[doc(hidden)]
    fn tops<T: MathElement>(names: Vec<Arc<str>>, spec: u64) -> Self::Tops<T>;
}

/// Which blob of a list disagreed with its shape, and how.
#[doc(hidden)]
#[derive(Debug)]
pub struct Mismatch {
    /// Its position in the list.
    pub index: usize,
    /// The shape error, naming both shapes.
    pub error: ShapeError,
}

/// Shapes whose every dim is known at compile time: a typed layer's
/// parameter blobs, which exist before any input is seen.
#[diagnostic::on_unimplemented(
    message = "the parameter shapes {Self} have a run-time dim",
    label = "parameters need every dim at compile time",
    note = "a parameter blob is made when the layer is, before any batch is seen: write its dims as numbers or the layer's const parameters (`(D<C>,)`), not `_`"
)]
pub trait StaticShapes: BlobShapes {}

fn view<'a, T: Element, S: Shape>(
    blobs: &[&'a Blob<T>],
    index: usize,
) -> Result<&'a TypedBlob<T, S>, Mismatch> {
    blobs[index]
        .as_typed::<S>()
        .map_err(|error| Mismatch { index, error })
}

fn bracketed<S: Shape>() -> String {
    format!("({})", S::describe())
}

impl BlobShapes for () {
    const LEN: usize = 0;
    type Views<'a, T: Element + 'a> = ();
    type Tops<T: MathElement> = ();
    fn dims() -> Vec<&'static [Option<usize>]> {
        Vec::new()
    }
    fn describe() -> String {
        "no blobs".to_string()
    }
    fn views<T: Element>(_blobs: &[&Blob<T>]) -> Result<(), Mismatch> {
        Ok(())
    }
    fn tops<T: MathElement>(_names: Vec<Arc<str>>, _spec: u64) {}
}

impl StaticShapes for () {}

impl<A: Shape> BlobShapes for (A,) {
    const LEN: usize = 1;
    type Views<'a, T: Element + 'a> = (&'a TypedBlob<T, A>,);
    type Tops<T: MathElement> = Top<T, A>;
    fn dims() -> Vec<&'static [Option<usize>]> {
        vec![A::Dims::STATIC_DIMS]
    }
    fn describe() -> String {
        bracketed::<A>()
    }
    fn views<'a, T: Element>(blobs: &[&'a Blob<T>]) -> Result<Self::Views<'a, T>, Mismatch> {
        Ok((view(blobs, 0)?,))
    }
    fn tops<T: MathElement>(names: Vec<Arc<str>>, spec: u64) -> Top<T, A> {
        let [a] = <[Arc<str>; 1]>::try_from(names).expect("one top name");
        Top::from_parts(a, spec)
    }
}

impl<A: StaticShape> StaticShapes for (A,) {}

/// The impls for two, three and four shapes: the same pattern.
macro_rules! blob_shapes {
    ($len:literal: $($s:ident $i:tt),+) => {
        impl<$($s: Shape),+> BlobShapes for ($($s,)+) {
            const LEN: usize = $len;
            type Views<'a, T: Element + 'a> = ($(&'a TypedBlob<T, $s>,)+);
            type Tops<T: MathElement> = ($(Top<T, $s>,)+);
            fn dims() -> Vec<&'static [Option<usize>]> {
                vec![$($s::Dims::STATIC_DIMS),+]
            }
            fn describe() -> String {
                [$(bracketed::<$s>()),+].join(", ")
            }
            fn views<'a, T: Element>(
                blobs: &[&'a Blob<T>],
            ) -> Result<Self::Views<'a, T>, Mismatch> {
                Ok(($(view::<T, $s>(blobs, $i)?,)+))
            }
            fn tops<T: MathElement>(names: Vec<Arc<str>>, spec: u64) -> Self::Tops<T> {
                let names = <[Arc<str>; $len]>::try_from(names).expect("a name a top");
                ($(Top::from_parts(names[$i].clone(), spec),)+)
            }
        }

        impl<$($s: StaticShape),+> StaticShapes for ($($s,)+) {}
    };
}

blob_shapes!(2: A 0, B 1);
blob_shapes!(3: A 0, B 1, C 2);
blob_shapes!(4: A 0, B 1, C 2, E 3);
