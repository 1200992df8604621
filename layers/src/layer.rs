//! Caffe's `Layer`, on typed blobs: what every layer, built in or a user's
//! own, implements, and the relations that make a mis-wired net a compile
//! error naming the layer and both shapes.

use std::any::Any;

use blob_runtime::typed::{SameAs, Shape, TypedBlob};
use blob_runtime::{Blob, BlobError, MathElement};

/// The result of a layer's pass.
pub type Result<T> = std::result::Result<T, BlobError>;

/// A layer with one input (Caffe's bottom) and one output (top), whose
/// shapes are types. Implement [`Layer::forward_blobs`] and
/// [`Layer::backward_blobs`] (Caffe's `Forward` and `Backward`, on the
/// runtime blobs, checking shapes at run time for nets read at run time);
/// the typed [`Layer::forward`] and [`Layer::backward`] come with them and
/// check the wiring when the program compiles.
///
/// ```
/// use blob_layers::{Layer, ReLU};
/// use blob_runtime::blob;
/// blob!(pub shape Hidden = _, 4);
/// let mut relu = ReLU::<f32, Hidden>::new();
/// let h = blob_runtime::typed::TypedBlob::<f32, Hidden>::with_dynamic(1)?;
/// h.mutable_cpu_data()?.copy_from_slice(&[-1.0, 2.0, -3.0, 4.0]);
/// relu.forward(&h, &h)?; // in place, as Caffe runs ReLU
/// assert_eq!(h.to_vec()?, vec![0.0, 2.0, 0.0, 4.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub trait Layer {
    /// The element type of its blobs.
    type Elem: MathElement;
    /// The shape it reads (Caffe's bottom).
    type Input: Shape;
    /// The shape it writes (Caffe's top).
    type Output: Shape;
    /// Caffe's name for the layer type (`"Convolution"`), for messages and
    /// model files.
    const TYPE: &'static str;
    /// Whether the layer may run in place, its bottom and top the same
    /// blob (Caffe's ReLU, Dropout...). Given one blob as both, a layer
    /// that may not is refused with an error saying so.
    const IN_PLACE: bool = false;

    /// Caffe `Forward` on the runtime blobs: `top` from `bottom`, shapes
    /// checked at run time.
    fn forward_blobs(&mut self, bottom: &Blob<Self::Elem>, top: &Blob<Self::Elem>) -> Result<()>;

    /// Caffe `Backward` on the runtime blobs: accumulates the parameters'
    /// gradients from `top`'s diff, and writes `bottom`'s diff when
    /// `propagate_down`.
    fn backward_blobs(
        &mut self,
        bottom: &Blob<Self::Elem>,
        top: &Blob<Self::Elem>,
        propagate_down: bool,
    ) -> Result<()>;

    /// The learnable blobs in Caffe's order (`blobs_`: weights, then bias).
    fn params(&self) -> Vec<&Blob<Self::Elem>> {
        Vec::new()
    }

    /// Caffe `Forward` on typed blobs: the wiring is checked when the
    /// program compiles (the input's dims must be the layer's input, the
    /// output's its output, the element type its own).
    fn forward<U, X, Y>(&mut self, bottom: &TypedBlob<U, X>, top: &TypedBlob<U, Y>) -> Result<()>
    where
        Self: Sized,
        U: ElementOf<Self>,
        X: Feeds<Self>,
        Y: WrittenBy<Self>,
    {
        refuse_in_place::<Self, U>(bottom.as_dyn(), top.as_dyn())?;
        self.forward_blobs(same(bottom.as_dyn()), same(top.as_dyn()))
    }

    /// Caffe `Backward` on typed blobs, with the wiring checked as in
    /// [`Layer::forward`].
    fn backward<U, X, Y>(
        &mut self,
        bottom: &TypedBlob<U, X>,
        top: &TypedBlob<U, Y>,
        propagate_down: bool,
    ) -> Result<()>
    where
        Self: Sized,
        U: ElementOf<Self>,
        X: Feeds<Self>,
        Y: WrittenBy<Self>,
    {
        refuse_in_place::<Self, U>(bottom.as_dyn(), top.as_dyn())?;
        self.backward_blobs(same(bottom.as_dyn()), same(top.as_dyn()), propagate_down)
    }
}

/// An error when `bottom` and `top` are one blob and layer `L` cannot run
/// in place (its output would overwrite the input it still reads).
fn refuse_in_place<L: Layer, U: MathElement>(bottom: &Blob<U>, top: &Blob<U>) -> Result<()> {
    if L::IN_PLACE || !std::ptr::eq(bottom, top) {
        return Ok(());
    }
    Err(BlobError::InvalidParameter {
        op: L::TYPE,
        detail: format!(
            "{} cannot run in place: its bottom and top are the same blob; give it an output blob of its own",
            L::TYPE
        ),
    })
}

/// The blob as the layer's element type, which [`ElementOf`] has proved
/// it is.
pub(crate) fn same<U: MathElement, T: MathElement>(blob: &Blob<U>) -> &Blob<T> {
    (blob as &dyn Any)
        .downcast_ref::<Blob<T>>()
        .expect("the caller proved U and T the same element type")
}

/// `Self` is the shape layer `L` reads.
#[diagnostic::on_unimplemented(
    message = "layer {L} reads {Expected}, but is fed {Self}",
    label = "not this layer's input",
    note = "a layer's input is the shape its type names; feed it the output of the layer before it"
)]
pub trait Feeds<L: Layer, Expected = <L as Layer>::Input>: Shape {}

#[diagnostic::do_not_recommend]
impl<X: Shape, L: Layer> Feeds<L> for X where X::Dims: SameAs<<L::Input as Shape>::Dims> {}

/// `Self` is the shape layer `L` writes.
#[diagnostic::on_unimplemented(
    message = "layer {L} writes {Expected}, but its output blob is {Self}",
    label = "not this layer's output",
    note = "a layer's output shape follows from its input and parameters; declare the blob with the shape the layer computes"
)]
pub trait WrittenBy<L: Layer, Expected = <L as Layer>::Output>: Shape {}

#[diagnostic::do_not_recommend]
impl<Y: Shape, L: Layer> WrittenBy<L> for Y where Y::Dims: SameAs<<L::Output as Shape>::Dims> {}

/// `Self` is the element type of layer `L`.
#[diagnostic::on_unimplemented(
    message = "layer {L} works on {Expected} blobs, but is fed {Self} blobs",
    label = "element types differ"
)]
pub trait ElementOf<L: Layer, Expected = <L as Layer>::Elem>: MathElement {}

#[diagnostic::do_not_recommend]
impl<U: MathElement, L: Layer> ElementOf<L> for U where U: SameAs<L::Elem> {}

/// Grows `buf` to `n` elements without shrinking (Caffe's grow-only
/// buffers): layers allocate nothing once the batch size is known. Scratch
/// is not a blob, but must fit in the room blobs leave under
/// [`blob_runtime::host_memory_limit`]: a convolution's column buffer can
/// be hundreds of times its input.
pub(crate) fn ensure<T: Clone + Default>(buf: &mut Vec<T>, n: usize) -> Result<()> {
    if buf.len() < n {
        let more = n - buf.len();
        let bytes = more.saturating_mul(size_of::<T>());
        blob_runtime::check_host_room("grow a layer's scratch buffer", bytes)?;
        buf.try_reserve_exact(more)
            .map_err(|_| BlobError::OutOfMemory {
                op: "grow a layer's scratch buffer",
                bytes,
            })?;
        buf.resize(n, T::default());
    }
    Ok(())
}

/// The run-time check of a dynamic entry point: `blob` has `want`'s shape.
pub(crate) fn expect_shape<T: MathElement>(
    op: &'static str,
    blob: &Blob<T>,
    want: &[usize],
) -> Result<()> {
    if blob.shape() == want {
        return Ok(());
    }
    Err(BlobError::ShapeMismatch {
        op,
        src: blob_runtime::shape_string(want),
        dst: blob.shape_string(),
    })
}

/// Whether `bottom` and `top` are the same blob (an in-place layer, as
/// Caffe runs ReLU and Dropout).
pub(crate) fn in_place<T: MathElement>(bottom: &Blob<T>, top: &Blob<T>) -> bool {
    std::ptr::eq(bottom, top)
}
