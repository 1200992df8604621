//! Layers written with typed blobs: a [`TypedLayer`] declares the shapes
//! of its bottoms, tops and parameter blobs as types, and its forward and
//! backward passes receive the net's blobs as [`TypedBlob`](blob_runtime::typed::TypedBlob) views of
//! those shapes, with compile-time strides, `offset` and `data_at`, and
//! the blobs' CPU and GPU guards.
//!
//! The net runs a typed layer as any [`DynLayer`](crate::DynLayer)
//! ([`DynTyped`] is the bridge): before each pass every blob is checked
//! against the declared shape, and a blob that disagrees is an error
//! naming the layer, the blob and both shapes. A top's run-time dim (`_`,
//! the batch) takes the value of the first bottom's run-time dim.
//!
//! One declaration serves every way a net is made: in a typed net
//! ([`NetSpec::add_typed`](crate::typed_net::NetSpec::add_typed)) the
//! bottoms' shapes are checked at compile time and the layer needs no
//! registration; a `.prototxt` naming its Caffe type reads it once
//! [`LayerRegistry::register_typed`](crate::registry::LayerRegistry::register_typed)
//! has been called, its parameter message (if it has one) included.
//!
//! A learned per-channel gain, `y[n, c] = x[n, c] * g[c]`:
//!
//! ```
//! use blob_layers::net::NetState;
//! use blob_layers::typed_layer::TypedLayer;
//! use blob_layers::typed_net::*;
//! use blob_proto::ParamMessage;
//! use blob_runtime::{Result, blob, typed::TypedBlob};
//!
//! /// `C` channels, gains starting at 1.
//! struct Gain<const C: usize>;
//!
//! type Rows<const C: usize> = (Dyn, D<C>);
//!
//! impl<const C: usize> TypedLayer<f32> for Gain<C> {
//!     const TYPE: &'static str = "Gain";
//!     type Bottoms = (Rows<C>,);
//!     type Tops = (Rows<C>,);
//!     type Params = ((D<C>,),);
//!
//!     fn from_param(_param: &ParamMessage) -> Result<Self> {
//!         Ok(Gain)
//!     }
//!
//!     fn init_params(&mut self, (g,): (&TypedBlob<f32, (D<C>,)>,)) -> Result<()> {
//!         g.mutable_cpu_data()?.fill(1.0);
//!         Ok(())
//!     }
//!
//!     fn forward(
//!         &mut self,
//!         (x,): (&TypedBlob<f32, Rows<C>>,),
//!         (y,): (&TypedBlob<f32, Rows<C>>,),
//!         (g,): (&TypedBlob<f32, (D<C>,)>,),
//!     ) -> Result<()> {
//!         let (x, g) = (x.to_vec()?, g.to_vec()?);
//!         let mut out = y.mutable_cpu_data()?;
//!         for n in 0..y.shape()[0] {
//!             for c in 0..C {
//!                 // A compile-time stride: `y.offset([n, c])` is `n * C + c`.
//!                 out[y.offset([n, c])] = x[n * C + c] * g[c];
//!             }
//!         }
//!         Ok(())
//!     }
//!
//!     fn backward(
//!         &mut self,
//!         (y,): (&TypedBlob<f32, Rows<C>>,),
//!         down: &[bool],
//!         (x,): (&TypedBlob<f32, Rows<C>>,),
//!         (g,): (&TypedBlob<f32, (D<C>,)>,),
//!     ) -> Result<()> {
//!         let (dy, xd, gd) = (y.diff_to_vec()?, x.to_vec()?, g.to_vec()?);
//!         let mut dg = g.mutable_cpu_diff()?;
//!         for (i, (&d, &v)) in dy.iter().zip(&xd).enumerate() {
//!             dg[i % C] += d * v;
//!         }
//!         if down[0] {
//!             let mut dx = x.mutable_cpu_diff()?;
//!             for (i, &d) in dy.iter().enumerate() {
//!                 dx[i] = d * gd[i % C];
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! blob!(pub shape Features = _, 4);
//! let mut n = NetSpec::<f32>::new("gain");
//! let x = n.input::<Features>("x");
//! let y = n.add_typed("gain", &x, Gain::<4>); // no registration
//! let mut net = n.batch(2).build(NetState::test())?;
//! net.blob("x").unwrap().mutable_cpu_data()?.fill(3.0);
//! net.forward()?;
//! assert_eq!(y.blob(&net)?.data_at([1, 3]), 3.0);
//! assert_eq!(net.layer_blobs("gain").unwrap()[0].shape(), &[4]);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```
//!
//! Fed the wrong shape, a typed net does not compile, and the message
//! names the layer and both shapes:
//!
//! ```compile_fail
//! # use blob_layers::typed_layer::TypedLayer;
//! # use blob_layers::typed_net::*;
//! # use blob_runtime::{Result, typed::TypedBlob};
//! # struct Gain<const C: usize>;
//! # impl<const C: usize> TypedLayer<f32> for Gain<C> {
//! #     const TYPE: &'static str = "Gain";
//! #     type Bottoms = ((Dyn, D<C>),);
//! #     type Tops = ((Dyn, D<C>),);
//! #     type Params = ();
//! #     fn from_param(_: &blob_proto::ParamMessage) -> Result<Self> { Ok(Gain) }
//! #     fn forward(&mut self, _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: ()) -> Result<()> { Ok(()) }
//! #     fn backward(&mut self, _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: &[bool], _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: ()) -> Result<()> { Ok(()) }
//! # }
//! blob_runtime::blob!(pub shape Features = _, 4);
//! let mut n = NetSpec::<f32>::new("gain");
//! let x = n.input::<Features>("x");
//! // error: Gain<8> takes a bottom of shape (Dyn, D<8>), but is given Features
//! let _ = n.add_typed("gain", &x, Gain::<8>);
//! ```

mod run;
mod shapes;

use blob_proto::ParamMessage;
use blob_proto::schema::FieldSchema;
use blob_runtime::MathElement;

use crate::layer::Result;

pub use run::DynTyped;
pub(crate) use run::{Candidate, CandidateSet};
pub use shapes::{BlobShapes, Mismatch, StaticShapes};

/// The typed views of the blobs of shapes `S`: `(&TypedBlob<T, A>,)` for
/// `(A,)`. What a [`TypedLayer`]'s passes receive; an impl may write the
/// tuple out instead (`(x,): (&TypedBlob<f32, Features>,)`).
pub type Views<'a, S, T> = <S as BlobShapes>::Views<'a, T>;

/// A layer written with typed blobs (a Caffe `Layer` whose blob shapes
/// are types): its Caffe type name, the shapes of its bottoms, tops and
/// parameter blobs, how it is built from its `LayerParameter` and
/// written back to one, and its passes over typed views. See the
/// [module](self) for a whole layer.
///
/// Shapes may use the layer's const parameters (`(Dyn, D<C>)` in
/// `Gain<const C: usize>`) and [`Dyn`](blob_runtime::typed::Dyn) for the
/// batch; parameter shapes are all static, since the blobs are made with
/// the layer.
pub trait TypedLayer<T: MathElement>: Send + Sized + 'static {
    /// Caffe's type name, written in a net's `type:` field (`"Gain"`).
    const TYPE: &'static str;
    /// The layer's own parameter message in `LayerParameter` (a field a
    /// fork's `caffe.proto` would add, as `gain_param`), registered with
    /// the layer; `None` for a layer without one.
    const PARAM_FIELD: Option<FieldSchema> = None;
    /// Whether the top may be the bottom's own blob (Caffe's in-place
    /// layers: ReLU, Scale): a typed net then writes over the bottom
    /// when nothing else reads it, and the passes get one blob as both,
    /// so they read its values before they write them (a read guard and
    /// a write guard on one blob at once is an error, not a race).
    const IN_PLACE: bool = false;
    /// A loss layer: its first top gets loss weight 1 (Caffe's
    /// `LossLayer`).
    const LOSS: bool = false;

    /// The bottoms' shapes, a tuple of up to four.
    type Bottoms: BlobShapes;
    /// The tops' shapes.
    type Tops: BlobShapes;
    /// The parameter blobs' shapes, in Caffe's order (`blobs_`): `()` for
    /// none.
    type Params: StaticShapes;

    /// The layer from its `LayerParameter` (its own message under
    /// [`PARAM_FIELD`](Self::PARAM_FIELD)'s name, with defaults filled
    /// in): Caffe's layer constructor and `LayerSetUp`.
    fn from_param(param: &ParamMessage) -> Result<Self>;

    /// The layer's fields in prototxt text, beside name, type, bottoms
    /// and tops (`gain_param { init: 2 }`): what a typed net writes, read
    /// back by [`from_param`](Self::from_param).
    fn write_fields(&self, _text: &mut String) {}

    /// Fills the parameter blobs once they are made (zeros before this):
    /// Caffe's fillers. A net's `.caffemodel` overwrites them later.
    fn init_params(&mut self, _params: Views<'_, Self::Params, T>) -> Result<()> {
        Ok(())
    }

    /// Caffe's `Forward`: the tops from the bottoms and parameters.
    fn forward(
        &mut self,
        bottoms: Views<'_, Self::Bottoms, T>,
        tops: Views<'_, Self::Tops, T>,
        params: Views<'_, Self::Params, T>,
    ) -> Result<()>;

    /// Caffe's `Backward`: accumulates the parameters' gradients from
    /// the tops' diffs, and writes bottom `i`'s diff where
    /// `propagate_down[i]`.
    fn backward(
        &mut self,
        tops: Views<'_, Self::Tops, T>,
        propagate_down: &[bool],
        bottoms: Views<'_, Self::Bottoms, T>,
        params: Views<'_, Self::Params, T>,
    ) -> Result<()>;
}
