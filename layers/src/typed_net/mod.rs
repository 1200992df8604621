//! Typed nets, wired by construction: each layer reads the output of a
//! layer declared before it, its output shape follows from its inputs'
//! at compile time, and what comes out is Caffe's [`Net`] of run-time
//! layers, the same engine a `.prototxt` builds.
//!
//! A [`NetSpec`] hands out a [`Top`] (a typed handle on a named blob) for
//! each input and each layer added; a layer takes the handles of its
//! bottoms, never a (bottom, top) pair, so a layer cannot be fed its own
//! output nor have its blobs swapped, and backward runs in the reverse
//! order by itself. The [`Net`] it builds has the named blobs and
//! layers, the parameters with the `lr_mult`/`decay_mult` declared beside
//! each layer, the solvers, `.caffemodel` loading and saving by layer
//! name, reshaping, devices and timing, with no user code.
//!
//! LeNet, declared, built and run:
//!
//! ```
//! use blob_layers::net::NetState;
//! use blob_layers::typed_net::*;
//! use blob_runtime::blob;
//!
//! blob!(pub shape Digits = _, 1, 28, 28);
//! blob!(pub shape Classes = _);
//!
//! let mut n = NetSpec::<f32>::new("LeNet");
//! let data = n.input::<Digits>("data");
//! let label = n.input::<Classes>("label");
//! let x = n.add("conv1", &data, Conv::<20, 5>::new().weight_filler(Filler::xavier()));
//! let x = n.add("pool1", &x, Pool::<2, 2>::max());
//! let x = n.add("conv2", &x, Conv::<50, 5>::new().weight_filler(Filler::xavier()));
//! let x = n.add("pool2", &x, Pool::<2, 2>::max());
//! let x = n.add("ip1", &x, Fc::<500>::new().weight_filler(Filler::xavier()));
//! let x = n.add("relu1", x, Neuron::relu()); // the handle moves: ReLU runs in place
//! let ip2 = n.add("ip2", &x, Fc::<10>::new().weight_filler(Filler::xavier()));
//! let loss = n.add("loss", (&ip2, &label), SoftmaxLoss::new());
//!
//! let mut net = n.batch(4).build(NetState::train())?;
//! assert_eq!(ip2.blob(&net)?.shape(), &[4, 10]);
//! net.blob("label").unwrap().mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
//! let value = net.forward()?;
//! net.backward()?;
//! assert_eq!(loss.blob(&net)?.cpu_data()?[0], value);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```
//!
//! A wrong wiring does not compile, and the error names the layer type
//! and both shapes:
//!
//! ```compile_fail
//! # use blob_layers::typed_net::*;
//! # blob_runtime::blob!(pub shape Wide = _, 8, 4, 4);
//! # blob_runtime::blob!(pub shape Narrow = _, 4, 4, 4);
//! let mut n = NetSpec::<f32>::new("bad");
//! let a = n.input::<Wide>("a");
//! let b = n.input::<Narrow>("b");
//! // error: Eltwise combines blobs of one shape, but is given Wide (_ 8 4 4) and Narrow (_ 4 4 4)
//! let _ = n.add("sum", (&a, &b), Eltwise::sum());
//! ```

mod specs;

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use blob_runtime::typed::{DimList, SameAs, SameShapeAs, Shape, TypedBlob};
use blob_runtime::{BlobError, MathElement};

use crate::layer::Result;
use crate::net::{Net, NetState, Phase};
use crate::registry::LayerRegistry;
use crate::typed_layer::{BlobShapes, TypedLayer};

pub use blob_runtime::typed::{D, Dyn};
pub use specs::{
    Accuracy, BatchNorm, Concat, ConcatAxis, ConcatOn, Conv, ConvHW, Eltwise, EltwiseOperand, Fc,
    FcInput, Flatten, GlobalPool, JoinOn, JoinedDim, LRN, LabelsFor, Neuron, PReLU, Pool, Prob,
    ReshapeAs, Scale, SliceOn, SoftmaxLoss, SplitOn,
};

static NEXT_SPEC: AtomicU64 = AtomicU64::new(0);

/// A typed handle on one blob of a [`NetSpec`]: its name and, as a type,
/// its shape. Cloning it lets several layers read the blob (Caffe inserts
/// a Split); passing it by value to a layer that can run in place lets
/// the layer overwrite the blob, which it does only when no clone is
/// left to read the old values.
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Features = _, 16);
/// let mut n = NetSpec::<f32>::new("branch");
/// let x = n.input::<Features>("x");
/// let kept = x.clone();
/// let y = n.add("relu", x, Neuron::relu()); // a clone is alive: not in place
/// assert_eq!((kept.name(), y.name()), ("x", "relu"));
/// ```
pub struct Top<T: MathElement, S: Shape> {
    handle: Handle,
    _shape: PhantomData<fn() -> (T, S)>,
}

/// What a [`Top`] holds, whatever its shape: the blob's name and the spec
/// it came from. Code on handles goes through this, compiled once rather
/// than once a shape.
#[derive(Clone)]
struct Handle {
    name: Arc<str>,
    spec: u64,
}

impl<T: MathElement, S: Shape> Clone for Top<T, S> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
            _shape: PhantomData,
        }
    }
}

impl<T: MathElement, S: Shape> std::fmt::Debug for Top<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Top(\"{}\": {})", self.handle.name, S::describe())
    }
}

impl<T: MathElement, S: Shape> Top<T, S> {
    /// The handle on blob `name` of the spec numbered `spec`.
    pub(crate) fn from_parts(name: Arc<str>, spec: u64) -> Self {
        Self {
            handle: Handle { name, spec },
            _shape: PhantomData,
        }
    }

    /// The blob's name in the net.
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// The blob in a net built from the spec, as a typed view of its
    /// shape (compile-time strides, `offset`, `data_at`); an error names
    /// the blob when the net lacks it (a layer of another phase wrote
    /// it) or has reshaped it away from `S`.
    pub fn blob<'n>(&self, net: &'n Net<T>) -> Result<&'n TypedBlob<T, S>> {
        let name = self.name();
        let blob = net.blob(name).ok_or_else(|| BlobError::Net {
            at: format!("blob '{name}'"),
            detail: format!(
                "net '{}' has no such blob (is its layer excluded in phase {:?}?)",
                net.name(),
                net.phase()
            ),
        })?;
        blob.as_typed::<S>().map_err(|e| BlobError::Net {
            at: format!("blob '{name}'"),
            detail: e.to_string(),
        })
    }

    /// The same blob under another name for its shape, with the same dims
    /// (shapes are compared by their dims): `top.named::<Conv2Out>()`.
    ///
    /// ```
    /// use blob_layers::typed_net::*;
    /// blob_runtime::blob!(pub shape Image = _, 1, 8, 8);
    /// blob_runtime::blob!(pub shape Features = _, 4, 6, 6);
    /// let mut n = NetSpec::<f32>::new("n");
    /// let x = n.input::<Image>("x");
    /// let y: Top<f32, Features> = n.add("conv", &x, Conv::<4, 3>::new()).named();
    /// # let _ = y;
    /// ```
    pub fn named<S2>(self) -> Top<T, S2>
    where
        S2: Shape,
        S: SameShapeAs<S2>,
    {
        Top {
            handle: self.handle,
            _shape: PhantomData,
        }
    }
}

/// The bottoms of one layer, as handles: `&top` (read), `top` (read, and
/// overwritten in place by a layer that can), or a tuple of up to four
/// `&top`s.
#[diagnostic::on_unimplemented(
    message = "a net of {T} cannot read {Self}",
    label = "not handles on {T} blobs",
    note = "a layer's bottoms are handles of the same NetSpec: `&top`, `top`, or a tuple of up to four `&top`s; a NetSpec<f32>'s handles do not feed a NetSpec<f64>"
)]
pub trait Bottoms<T: MathElement> {
    /// The shapes, as [`One`], [`Two`], [`Three`] or [`Four`].
    type Shapes;
    /// The handles without their shapes: what a net's text needs, the
    /// same code for every layer.
    #[doc(hidden)]
    fn into_list(self) -> BottomList;
}

/// A layer's bottoms without their shapes.
#[doc(hidden)]
pub struct BottomList {
    handles: Vec<Handle>,
    /// Whether the one bottom was given by value and no clone of it is
    /// alive: the layer may write over it.
    may_overwrite: bool,
}

impl BottomList {
    fn read(handles: &[&Handle]) -> Self {
        Self {
            handles: handles.iter().map(|h| (*h).clone()).collect(),
            may_overwrite: false,
        }
    }

    fn owned(handle: Handle) -> Self {
        let may_overwrite = Arc::strong_count(&handle.name) == 1;
        Self {
            handles: vec![handle],
            may_overwrite,
        }
    }
}

/// Names types without owning values of them.
type Marker<T> = PhantomData<fn() -> T>;

/// The shape of a layer's one bottom.
pub struct One<X>(Marker<X>);
/// The shapes of a layer's two bottoms.
pub struct Two<X, Y>(Marker<(X, Y)>);
/// The shapes of a layer's three bottoms.
pub struct Three<X, Y, Z>(Marker<(X, Y, Z)>);
/// The shapes of a layer's four bottoms.
pub struct Four<X, Y, Z, W>(Marker<(X, Y, Z, W)>);

impl<T: MathElement, X: Shape> Bottoms<T> for &Top<T, X> {
    type Shapes = One<X>;
    fn into_list(self) -> BottomList {
        BottomList::read(&[&self.handle])
    }
}

impl<T: MathElement, X: Shape> Bottoms<T> for Top<T, X> {
    type Shapes = One<X>;
    fn into_list(self) -> BottomList {
        BottomList::owned(self.handle)
    }
}

impl<T: MathElement, X: Shape, Y: Shape> Bottoms<T> for (&Top<T, X>, &Top<T, Y>) {
    type Shapes = Two<X, Y>;
    fn into_list(self) -> BottomList {
        BottomList::read(&[&self.0.handle, &self.1.handle])
    }
}

impl<T: MathElement, X: Shape, Y: Shape, Z: Shape> Bottoms<T>
    for (&Top<T, X>, &Top<T, Y>, &Top<T, Z>)
{
    type Shapes = Three<X, Y, Z>;
    fn into_list(self) -> BottomList {
        BottomList::read(&[&self.0.handle, &self.1.handle, &self.2.handle])
    }
}

impl<T: MathElement, X: Shape, Y: Shape, Z: Shape, W: Shape> Bottoms<T>
    for (&Top<T, X>, &Top<T, Y>, &Top<T, Z>, &Top<T, W>)
{
    type Shapes = Four<X, Y, Z, W>;
    fn into_list(self) -> BottomList {
        let handles = [
            &self.0.handle,
            &self.1.handle,
            &self.2.handle,
            &self.3.handle,
        ];
        BottomList::read(&handles)
    }
}

/// The bottoms `Self` that the [`TypedLayer`] `L` declares take the
/// bottoms a typed net gives it (`Given`: [`One`], [`Two`], [`Three`] or
/// [`Four`] shapes): as many, each of the same dims.
#[diagnostic::on_unimplemented(
    message = "{L} takes bottoms {Self}, but is given {Given}",
    label = "another number of bottoms than the layer declares"
)]
pub trait TakesBottoms<Given, L> {}

/// A bottom of shape `Self` is what `L` declares for it, `Want`.
#[diagnostic::on_unimplemented(
    message = "{L} takes a bottom of shape {Want}, but is given {Self}",
    label = "expected a bottom of shape {Want}"
)]
pub trait BottomOf<L, Want: Shape>: Shape {}

#[diagnostic::do_not_recommend]
impl<L, X: Shape, W: Shape> BottomOf<L, W> for X where X::Dims: SameAs<W::Dims> {}

impl<L, X: BottomOf<L, A>, A: Shape> TakesBottoms<One<X>, L> for (A,) {}
impl<L, X, Y, A: Shape, B: Shape> TakesBottoms<Two<X, Y>, L> for (A, B)
where
    X: BottomOf<L, A>,
    Y: BottomOf<L, B>,
{
}
impl<L, X, Y, Z, A: Shape, B: Shape, C: Shape> TakesBottoms<Three<X, Y, Z>, L> for (A, B, C)
where
    X: BottomOf<L, A>,
    Y: BottomOf<L, B>,
    Z: BottomOf<L, C>,
{
}
impl<L, X, Y, Z, V, A: Shape, B: Shape, C: Shape, E: Shape> TakesBottoms<Four<X, Y, Z, V>, L>
    for (A, B, C, E)
where
    X: BottomOf<L, A>,
    Y: BottomOf<L, B>,
    Z: BottomOf<L, C>,
    V: BottomOf<L, E>,
{
}

/// A layer's `LayerParameter` as a typed net writes it: its Caffe type,
/// whether it may run in place, and its other fields. Every
/// [`LayerSpec`] is one; these do not depend on the bottoms' shapes.
pub trait LayerFields {
    /// Caffe's type name (`"Convolution"`).
    fn type_name(&self) -> &str;
    /// Whether the layer may write its output over its one bottom (Caffe's
    /// in-place layers: ReLU, Dropout, BatchNorm, Scale...).
    fn in_place(&self) -> bool {
        false
    }
    /// The layer's fields other than name, type, bottom and top, in
    /// prototxt text (`convolution_param { num_output: 20 ... }`).
    fn write_fields(&self, text: &mut String);
    /// The fields as a trait object. A layer generic over its settings
    /// (`Conv<COUT, K, S, P>`) hands out fields of one type for every
    /// setting, so a net's declaration compiles that code once.
    #[doc(hidden)]
    fn as_fields(&self) -> &dyn LayerFields
    where
        Self: Sized,
    {
        self
    }
}

/// A layer as a typed net declares it: its output shape as a function of
/// its bottoms' (`In` is [`One`], [`Two`], [`Three`] or [`Four`] shapes),
/// on top of its [`LayerFields`]. Implement both for a layer of your own
/// (built by a [`LayerRegistry`] you pass to [`NetSpec::build_with`]).
///
/// ```
/// use blob_layers::typed_net::*;
/// use blob_runtime::typed::Shape;
///
/// /// Caffe's Power layer squaring its input: the shape is kept.
/// struct Square;
/// impl LayerFields for Square {
///     fn type_name(&self) -> &str { "Power" }
///     fn write_fields(&self, text: &mut String) { text.push_str("power_param { power: 2 }"); }
/// }
/// impl<X: Shape> LayerSpec<One<X>> for Square {
///     type Out = X;
/// }
///
/// blob_runtime::blob!(pub shape Features = _, 3);
/// let mut n = NetSpec::<f32>::new("square");
/// let x = n.input::<Features>("x");
/// let y = n.add("square", &x, Square);
/// let net = n.batch(1).build(blob_layers::net::NetState::test())?;
/// assert_eq!(y.blob(&net)?.shape(), &[1, 3]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub trait LayerSpec<In>: LayerFields {
    /// The output's shape.
    type Out: Shape;
}

/// Caffe's `FillerParameter`: how a parameter blob starts.
///
/// ```
/// use blob_layers::typed_net::{Filler, VarianceNorm};
/// assert_eq!(Filler::gaussian(0.0, 0.01).to_string(), r#"type: "gaussian" mean: 0 std: 0.01"#);
/// assert_eq!(Filler::xavier().variance_norm(VarianceNorm::Average).to_string(),
///            r#"type: "xavier" variance_norm: AVERAGE"#);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Filler {
    kind: FillerKind,
    variance_norm: Option<VarianceNorm>,
}

#[derive(Clone, Debug, PartialEq)]
enum FillerKind {
    Constant(f64),
    Uniform(f64, f64),
    Gaussian(f64, f64),
    SparseGaussian(f64, f64, usize),
    PositiveUnitball,
    Xavier,
    Msra,
    Bilinear,
}

/// Caffe's `FillerParameter.variance_norm`: the fan xavier and msra
/// divide by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarianceNorm {
    /// `FAN_IN` (Caffe's default).
    FanIn,
    /// `FAN_OUT`.
    FanOut,
    /// `AVERAGE` of the two.
    Average,
}

impl Filler {
    fn of(kind: FillerKind) -> Self {
        Self {
            kind,
            variance_norm: None,
        }
    }
    /// Caffe `constant` (`value`).
    pub fn constant(value: f64) -> Self {
        Self::of(FillerKind::Constant(value))
    }
    /// Caffe `uniform` on `[min, max]`.
    pub fn uniform(min: f64, max: f64) -> Self {
        Self::of(FillerKind::Uniform(min, max))
    }
    /// Caffe `gaussian` (`mean`, `std`).
    pub fn gaussian(mean: f64, std: f64) -> Self {
        Self::of(FillerKind::Gaussian(mean, std))
    }
    /// Caffe `gaussian` with `sparse`: each weight is kept with
    /// probability `sparse / num_outputs`, the others are 0.
    pub fn sparse_gaussian(mean: f64, std: f64, sparse: usize) -> Self {
        Self::of(FillerKind::SparseGaussian(mean, std, sparse))
    }
    /// Caffe `positive_unitball`: positive, each output's weights summing
    /// to 1.
    pub fn positive_unitball() -> Self {
        Self::of(FillerKind::PositiveUnitball)
    }
    /// Caffe `bilinear`: a deconvolution's upsampling kernel.
    pub fn bilinear() -> Self {
        Self::of(FillerKind::Bilinear)
    }
    /// Caffe `xavier`.
    pub fn xavier() -> Self {
        Self::of(FillerKind::Xavier)
    }
    /// Caffe `msra`.
    pub fn msra() -> Self {
        Self::of(FillerKind::Msra)
    }
    /// The fan xavier and msra divide by.
    pub fn variance_norm(mut self, norm: VarianceNorm) -> Self {
        self.variance_norm = Some(norm);
        self
    }
}

impl std::fmt::Display for Filler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            FillerKind::Constant(v) => write!(f, r#"type: "constant" value: {v}"#)?,
            FillerKind::Uniform(a, b) => write!(f, r#"type: "uniform" min: {a} max: {b}"#)?,
            FillerKind::Gaussian(m, s) => write!(f, r#"type: "gaussian" mean: {m} std: {s}"#)?,
            FillerKind::SparseGaussian(m, s, n) => {
                write!(f, r#"type: "gaussian" mean: {m} std: {s} sparse: {n}"#)?
            }
            FillerKind::PositiveUnitball => f.write_str(r#"type: "positive_unitball""#)?,
            FillerKind::Bilinear => f.write_str(r#"type: "bilinear""#)?,
            FillerKind::Xavier => f.write_str(r#"type: "xavier""#)?,
            FillerKind::Msra => f.write_str(r#"type: "msra""#)?,
        }
        match self.variance_norm {
            None => Ok(()),
            Some(VarianceNorm::FanIn) => f.write_str(" variance_norm: FAN_IN"),
            Some(VarianceNorm::FanOut) => f.write_str(" variance_norm: FAN_OUT"),
            Some(VarianceNorm::Average) => f.write_str(" variance_norm: AVERAGE"),
        }
    }
}

/// Caffe's `ParamSpec` of one parameter blob: its learning-rate and
/// weight-decay multipliers.
///
/// ```
/// let frozen = blob_layers::typed_net::Mult::new(0.0, 0.0);
/// assert_eq!(frozen.to_string(), "param { lr_mult: 0 decay_mult: 0 }");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mult {
    /// `lr_mult`.
    pub lr: f64,
    /// `decay_mult`.
    pub decay: f64,
}

impl Mult {
    /// `param { lr_mult: lr decay_mult: decay }`.
    pub fn new(lr: f64, decay: f64) -> Self {
        Self { lr, decay }
    }
}

impl std::fmt::Display for Mult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "param {{ lr_mult: {} decay_mult: {} }}",
            self.lr, self.decay
        )
    }
}

/// Adds one typed layer to a registry: `LayerRegistry::register_typed::<L>`.
type Registration<T> = fn(&mut LayerRegistry<T>) -> Result<()>;

/// A net being declared: inputs and layers in order, each layer reading
/// handles of blobs declared before it. [`NetSpec::build`] makes the
/// [`Net`]; mistakes that only show at run time (a name used twice, a
/// handle of another spec, an input without a batch) are errors there,
/// naming the layer or blob.
pub struct NetSpec<T: MathElement> {
    text: NetText,
    /// How to register each typed layer added: the net it builds knows
    /// them without the caller's registry.
    typed_layers: Vec<Registration<T>>,
    _elem: PhantomData<fn() -> T>,
}

impl<T: MathElement> std::fmt::Debug for NetSpec<T> {
    /// The net's name, element type, inputs and layers so far.
    ///
    /// ```
    /// let spec = blob_layers::typed_net::NetSpec::<f32>::new("tiny");
    /// assert!(format!("{spec:?}").contains("\"tiny\""));
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetSpec")
            .field("name", &self.text.name)
            .field("element", &<T as blob_runtime::Element>::NAME)
            .field(
                "inputs",
                &self
                    .text
                    .inputs
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("layers", &self.text.layer_names)
            .finish()
    }
}

/// What a [`NetSpec`] has declared, as prototxt text: the part that
/// depends on neither the element type nor the shapes, compiled once.
struct NetText {
    id: u64,
    name: String,
    text: String,
    inputs: Vec<Input>,
    layer_names: Vec<String>,
    batch: Option<usize>,
    error: Option<(String, String)>,
}

/// One layer as [`NetSpec::add`] declares it, its types left behind.
struct Declared<'a> {
    name: &'a str,
    phase: Option<Phase>,
    type_name: &'a str,
    bottoms: Vec<Handle>,
    fields: String,
}

struct Input {
    name: String,
    dims: &'static [Option<usize>],
}

impl<T: MathElement> NetSpec<T> {
    /// An empty net named `name`.
    pub fn new(name: &str) -> Self {
        Self {
            text: NetText::new(name),
            typed_layers: Vec::new(),
            _elem: PhantomData,
        }
    }

    /// An input blob of shape `S` (Caffe's `Input` layer, named as its
    /// blob); its run-time dims (`_`) take the [`batch`](Self::batch).
    pub fn input<S: Shape>(&mut self, name: &str) -> Top<T, S> {
        let top = self.text.add_input(name, S::Dims::STATIC_DIMS);
        self.top(top)
    }

    /// The value of the inputs' run-time dims (`_` in `blob!`), the
    /// batch; a net reshapes to another with [`Net::reshape`] after its
    /// inputs are reshaped.
    pub fn batch(&mut self, batch: usize) -> &mut Self {
        self.text.batch = Some(batch);
        self
    }

    /// Adds layer `name` reading `bottoms` and returns the handle of its
    /// output, whose shape the layer computes from its bottoms' at compile
    /// time. An output no later layer reads becomes an output of the net,
    /// as in Caffe: a handle left unused is a compiler warning saying so,
    /// and binding it (`let _loss = n.add("loss", ..)`) says that is
    /// meant.
    #[must_use = "no layer reads this output: it becomes an output of the net (Caffe's rule); bind it (`let _loss = ...`) to keep it so"]
    pub fn add<B, L>(&mut self, name: &str, bottoms: B, layer: L) -> Top<T, L::Out>
    where
        B: Bottoms<T>,
        L: LayerSpec<B::Shapes>,
    {
        let top = self
            .text
            .add_layer(name, None, bottoms.into_list(), layer.as_fields());
        self.top(top)
    }

    /// Adds layer `name`, a [`TypedLayer`] of your own, reading `bottoms`,
    /// and returns the handles of its tops (one [`Top`], or a tuple of
    /// them): the bottoms' shapes are checked against the layer's at
    /// compile time, and the net built from this spec knows the layer
    /// without registration. The net's layer is built from the fields
    /// the layer writes ([`TypedLayer::write_fields`], read back by
    /// [`TypedLayer::from_param`]), as the spec's `.prototxt` builds it.
    /// A second top is named `{name}_1`, a third `{name}_2`. See
    /// [`typed_layer`](crate::typed_layer) for a whole layer.
    #[must_use = "no layer reads this output: it becomes an output of the net (Caffe's rule); bind it (`let _loss = ...`) to keep it so"]
    pub fn add_typed<B, L>(
        &mut self,
        name: &str,
        bottoms: B,
        layer: L,
    ) -> <L::Tops as BlobShapes>::Tops<T>
    where
        B: Bottoms<T>,
        L: TypedLayer<T>,
        L::Bottoms: TakesBottoms<B::Shapes, L>,
    {
        self.typed_layer(None, name, bottoms.into_list(), layer)
    }

    /// [`add_typed`](Self::add_typed) for one phase only (Caffe's
    /// `include { phase }`).
    #[must_use = "no layer reads this output: it becomes an output of the net (Caffe's rule); bind it (`let _loss = ...`) to keep it so"]
    pub fn add_typed_in<B, L>(
        &mut self,
        phase: Phase,
        name: &str,
        bottoms: B,
        layer: L,
    ) -> <L::Tops as BlobShapes>::Tops<T>
    where
        B: Bottoms<T>,
        L: TypedLayer<T>,
        L::Bottoms: TakesBottoms<B::Shapes, L>,
    {
        self.typed_layer(Some(phase), name, bottoms.into_list(), layer)
    }

    fn typed_layer<L: TypedLayer<T>>(
        &mut self,
        phase: Option<Phase>,
        name: &str,
        bottoms: BottomList,
        layer: L,
    ) -> <L::Tops as BlobShapes>::Tops<T> {
        let mut fields = String::new();
        layer.write_fields(&mut fields);
        let overwrites = L::IN_PLACE && bottoms.may_overwrite;
        let declared = Declared {
            name,
            phase,
            type_name: L::TYPE,
            bottoms: bottoms.handles,
            fields,
        };
        let names = self.text.add_layer_tops(declared, overwrites, L::Tops::LEN);
        self.typed_layers
            .push(LayerRegistry::<T>::register_typed::<L>);
        L::Tops::tops(names, self.text.id)
    }

    /// [`add`](Self::add) for one phase only (Caffe's `include { phase }`):
    /// an `Accuracy` in the test net.
    #[must_use = "no layer reads this output: it becomes an output of the net (Caffe's rule); bind it (`let _loss = ...`) to keep it so"]
    pub fn add_in<B, L>(&mut self, phase: Phase, name: &str, bottoms: B, layer: L) -> Top<T, L::Out>
    where
        B: Bottoms<T>,
        L: LayerSpec<B::Shapes>,
    {
        let top = self
            .text
            .add_layer(name, Some(phase), bottoms.into_list(), layer.as_fields());
        self.top(top)
    }

    /// Caffe `Slice` on the channel axis: `(N, C, H, W)` split at channel
    /// `POINT` into `(N, POINT, H, W)` and `(N, C - POINT, H, W)`, the
    /// tops named `tops`. [`slice_axis`](Self::slice_axis) splits another
    /// axis.
    ///
    /// ```
    /// use blob_layers::typed_net::*;
    /// blob_runtime::blob!(pub shape Pair = _, 6, 8, 8);
    /// let mut n = NetSpec::<f32>::new("n");
    /// let x = n.input::<Pair>("x");
    /// let (a, b) = n.slice::<2, _>("split", &x, ["left", "right"]);
    /// let _: Top<f32, (Dyn, D<2>, D<8>, D<8>)> = a;
    /// let _: Top<f32, (Dyn, D<4>, D<8>, D<8>)> = b;
    /// ```
    pub fn slice<const POINT: usize, X>(
        &mut self,
        name: &str,
        bottom: &Top<T, X>,
        tops: [&str; 2],
    ) -> (
        Top<T, <X as SliceOn<1, POINT>>::First>,
        Top<T, <X as SliceOn<1, POINT>>::Rest>,
    )
    where
        X: SliceOn<1, POINT>,
    {
        self.slice_axis::<1, POINT, X>(name, bottom, tops)
    }

    /// Caffe `Slice` on axis `AXIS` (`slice_param { axis: AXIS
    /// slice_point: POINT }`): the bottom split at `POINT` on that axis
    /// into two tops named `tops`, their shapes computed at compile time.
    ///
    /// ```
    /// use blob_layers::typed_net::*;
    /// blob_runtime::blob!(pub shape Rows = _, 3, 10, 4);
    /// let mut n = NetSpec::<f32>::new("n");
    /// let x = n.input::<Rows>("x");
    /// let (top, bottom) = n.slice_axis::<2, 6, _>("halves", &x, ["top", "bottom"]);
    /// let _: Top<f32, (Dyn, D<3>, D<6>, D<4>)> = top;
    /// let _: Top<f32, (Dyn, D<3>, D<4>, D<4>)> = bottom;
    /// ```
    pub fn slice_axis<const AXIS: usize, const POINT: usize, X>(
        &mut self,
        name: &str,
        bottom: &Top<T, X>,
        tops: [&str; 2],
    ) -> (
        Top<T, <X as SliceOn<AXIS, POINT>>::First>,
        Top<T, <X as SliceOn<AXIS, POINT>>::Rest>,
    )
    where
        X: SliceOn<AXIS, POINT>,
    {
        let fields = format!("slice_param {{ axis: {AXIS} slice_point: {POINT} }}");
        let [a, b] = self
            .text
            .add_slice(name, BottomList::read(&[&bottom.handle]), fields, tops);
        (self.top(a), self.top(b))
    }

    fn top<S: Shape>(&self, name: Arc<str>) -> Top<T, S> {
        Top::from_parts(name, self.text.id)
    }

    /// The net in Caffe's text format, as [`build`](Self::build) reads it
    /// (the inputs at the batch given, or 1).
    pub fn to_prototxt(&self) -> String {
        self.text.to_prototxt()
    }

    /// Builds the [`Net`] with the built-in layers, in `state`'s phase.
    pub fn build(&self, state: NetState) -> Result<Net<T>> {
        self.build_with(state, &LayerRegistry::with_caffe_layers())
    }

    /// Builds the [`Net`] with the layers of `registry` (the built-in ones
    /// and your own), and the typed layers added with
    /// [`add_typed`](Self::add_typed).
    pub fn build_with(&self, state: NetState, registry: &LayerRegistry<T>) -> Result<Net<T>> {
        let text = self.text.checked()?;
        let mut own;
        let registry = if self.typed_layers.is_empty() {
            registry
        } else {
            own = registry.clone();
            for register in &self.typed_layers {
                register(&mut own)?;
            }
            &own
        };
        Net::builder()
            .state(state)
            .registry(registry)
            .from_prototxt(&text)
    }
}

impl NetText {
    fn new(name: &str) -> Self {
        let mut text = String::new();
        let _ = writeln!(text, "name: {}", quoted(name));
        Self {
            id: NEXT_SPEC.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            text,
            inputs: Vec::new(),
            layer_names: Vec::new(),
            batch: None,
            error: None,
        }
    }

    fn add_input(&mut self, name: &str, dims: &'static [Option<usize>]) -> Arc<str> {
        self.check_name(name);
        self.inputs.push(Input {
            name: name.to_string(),
            dims,
        });
        self.layer_names.push(name.to_string());
        Arc::from(name)
    }

    /// Appends a layer's text; returns its top's name. The same code for
    /// every layer: only the handle [`NetSpec::add`] makes of it is typed.
    fn add_layer(
        &mut self,
        name: &str,
        phase: Option<Phase>,
        bottoms: BottomList,
        spec: &dyn LayerFields,
    ) -> Arc<str> {
        let mut fields = String::new();
        spec.write_fields(&mut fields);
        let layer = Declared {
            name,
            phase,
            type_name: spec.type_name(),
            bottoms: bottoms.handles,
            fields,
        };
        let [top] = self
            .add_layer_tops(layer, spec.in_place() && bottoms.may_overwrite, 1)
            .try_into()
            .expect("one top");
        top
    }

    /// Appends a layer of `count` tops: the first named as the layer (or
    /// as its bottom, when it `overwrites` it in place), the others
    /// `{name}_1`, `{name}_2`...; returns their names.
    fn add_layer_tops(
        &mut self,
        layer: Declared<'_>,
        overwrites: bool,
        count: usize,
    ) -> Vec<Arc<str>> {
        let name = layer.name;
        let tops: Vec<Arc<str>> = (0..count)
            .map(|i| match (i, layer.bottoms.first()) {
                (0, Some(bottom)) if overwrites && count == 1 => bottom.name.clone(),
                (0, _) => Arc::from(name),
                (i, _) => Arc::from(format!("{name}_{i}")),
            })
            .collect();
        for extra in &tops[1.min(count)..] {
            self.check_name(extra);
        }
        let names: Vec<&str> = tops.iter().map(|t| &**t).collect();
        self.write_layer(layer, &names);
        for extra in &tops[1.min(count)..] {
            self.layer_names.push(extra.to_string());
        }
        tops
    }

    /// Caffe `Slice` on the channel axis at `point`, its tops named.
    fn add_slice(
        &mut self,
        name: &str,
        bottom: BottomList,
        fields: String,
        tops: [&str; 2],
    ) -> [Arc<str>; 2] {
        let layer = Declared {
            name,
            phase: None,
            type_name: "Slice",
            bottoms: bottom.handles,
            fields,
        };
        for top in tops {
            if top != name {
                self.check_name(top);
            }
        }
        self.write_layer(layer, &tops);
        for top in tops {
            if top != name {
                self.layer_names.push(top.to_string());
            }
        }
        tops.map(Arc::from)
    }

    fn write_layer(&mut self, layer: Declared<'_>, tops: &[&str]) {
        let name = layer.name;
        self.check_name(name);
        if let Some(other) = layer.bottoms.iter().find(|h| h.spec != self.id) {
            self.fail(
                format!("layer '{name}'"),
                format!("bottom '{}' is a handle of another NetSpec", other.name),
            );
        }
        let mut text = format!(
            "layer {{\n  name: {}\n  type: {}\n",
            quoted(name),
            quoted(layer.type_name)
        );
        for bottom in &layer.bottoms {
            let _ = writeln!(text, "  bottom: {}", quoted(&bottom.name));
        }
        for top in tops {
            let _ = writeln!(text, "  top: {}", quoted(top));
        }
        if let Some(phase) = layer.phase {
            let phase = match phase {
                Phase::Train => "TRAIN",
                Phase::Test => "TEST",
            };
            let _ = writeln!(text, "  include {{ phase: {phase} }}");
        }
        if !layer.fields.is_empty() {
            let _ = writeln!(text, "  {}", layer.fields);
        }
        text.push_str("}\n");
        self.text.push_str(&text);
        self.layer_names.push(name.to_string());
    }

    fn check_name(&mut self, name: &str) {
        if self.layer_names.iter().any(|n| n == name) {
            self.fail(
                format!("layer '{name}'"),
                "a layer or input of that name is declared already".to_string(),
            );
        }
        if name.is_empty() || name.chars().any(char::is_control) {
            self.fail(
                format!("layer {name:?}"),
                "a name must be non-empty and without control characters".to_string(),
            );
        }
    }

    fn fail(&mut self, at: String, detail: String) {
        if self.error.is_none() {
            self.error = Some((format!("net '{}', {at}", self.name), detail));
        }
    }

    fn to_prototxt(&self) -> String {
        let mut text = self.text.clone();
        for input in &self.inputs {
            let dims: Vec<String> = input
                .dims
                .iter()
                .map(|d| format!("dim: {}", d.unwrap_or(self.batch.unwrap_or(1))))
                .collect();
            let _ = writeln!(
                text,
                "input: {}\ninput_shape {{ {} }}",
                quoted(&input.name),
                dims.join(" ")
            );
        }
        text
    }

    /// The text to build from, or the first mistake declared.
    fn checked(&self) -> Result<String> {
        if let Some((at, detail)) = &self.error {
            return Err(BlobError::Net {
                at: at.clone(),
                detail: detail.clone(),
            });
        }
        if self.batch.is_none()
            && let Some(input) = self.inputs.iter().find(|i| i.dims.contains(&None))
        {
            return Err(BlobError::Net {
                at: format!("net '{}', input '{}'", self.name, input.name),
                detail: "its shape has a run-time dim (`_`): give the batch with NetSpec::batch"
                    .to_string(),
            });
        }
        Ok(self.to_prototxt())
    }
}

/// `s` as a prototxt string literal.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}
