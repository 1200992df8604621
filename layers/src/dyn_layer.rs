//! Caffe's `Layer` at run time: built from its `LayerParameter`, any
//! number of bottoms and tops, a reshape step that computes the tops'
//! shapes from the bottoms', forward, backward with `propagate_down` per
//! bottom, and its parameter blobs. A [`Net`](crate::net::Net) holds these
//! as trait objects; users add their own through the
//! [`LayerRegistry`](crate::registry::LayerRegistry).

use blob_proto::ParamMessage;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::activation::{Activate, Rectify};
use crate::folded_activation::{leaky, relu6};
use crate::layer::Result;
use crate::{Activation, ChannelAffine};

/// How many blobs a layer takes as bottoms or produces as tops (Caffe's
/// `ExactNumBottomBlobs`, `MinTopBlobs`, ...).
///
/// ```
/// use blob_layers::Arity;
/// assert!(Arity::exactly(1).admits(1));
/// assert!(!Arity::at_least(2).admits(1));
/// assert_eq!(Arity::range(1, 2).to_string(), "1 to 2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity {
    /// The fewest.
    pub min: usize,
    /// The most (`usize::MAX`: no limit).
    pub max: usize,
}

impl Arity {
    /// Exactly `n`.
    pub const fn exactly(n: usize) -> Self {
        Self { min: n, max: n }
    }

    /// `n` or more.
    pub const fn at_least(n: usize) -> Self {
        Self {
            min: n,
            max: usize::MAX,
        }
    }

    /// From `min` to `max`, both included.
    pub const fn range(min: usize, max: usize) -> Self {
        Self { min, max }
    }

    /// Whether `n` blobs fit.
    pub fn admits(self, n: usize) -> bool {
        (self.min..=self.max).contains(&n)
    }
}

impl std::fmt::Display for Arity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.min, self.max) {
            (a, b) if a == b => write!(f, "{a}"),
            (a, usize::MAX) => write!(f, "at least {a}"),
            (a, b) => write!(f, "{a} to {b}"),
        }
    }
}

/// What a top becomes on [`DynLayer::reshape`]: its shape, and whether it
/// is a view of a bottom's memory (Caffe's `ShareData` / `ShareDiff` in
/// Split, Flatten and Reshape).
///
/// ```
/// let top = blob_layers::TopShape::new(vec![2, 3]);
/// assert_eq!(top.dims, [2, 3]);
/// assert!(top.shares.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopShape {
    /// The top's dims.
    pub dims: Vec<usize>,
    /// A bottom whose memory the top views, and which part of it.
    pub shares: Option<(usize, Sharing)>,
}

/// Which of a bottom's buffers a top views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// The data only (Caffe's Split: each top its own diff).
    Data,
    /// Data and diff (Flatten, Reshape: backward has nothing to do).
    DataAndDiff,
}

impl TopShape {
    /// A top of its own memory.
    pub fn new(dims: Vec<usize>) -> Self {
        Self { dims, shares: None }
    }

    /// A top that views bottom `bottom`'s memory.
    pub fn sharing(dims: Vec<usize>, bottom: usize, sharing: Sharing) -> Self {
        Self {
            dims,
            shares: Some((bottom, sharing)),
        }
    }
}

/// A layer a net runs: Caffe's `Layer`, with its parameters read at run
/// time. Object-safe: a [`Net`](crate::net::Net) holds
/// `Box<dyn DynLayer<T>>`s.
///
/// The net calls [`DynLayer::reshape`] before every forward pass (as
/// Caffe's `Layer::Forward` does), gives the tops the shapes it returns
/// (memory only grows), then calls [`DynLayer::forward`]. A layer runs on
/// the device its blobs live on.
///
/// A user's layer, registered by type name:
///
/// ```
/// use blob_layers::{Arity, DynLayer, TopShape, registry::LayerRegistry};
/// use blob_runtime::Blob;
///
/// /// y = 2x.
/// struct Double;
/// impl DynLayer<f32> for Double {
///     fn type_name(&self) -> &str { "Double" }
///     fn reshape(&mut self, bottoms: &[&Blob<f32>], _tops: &[&Blob<f32>])
///         -> blob_runtime::Result<Vec<TopShape>> {
///         Ok(vec![TopShape::new(bottoms[0].shape().to_vec())])
///     }
///     fn forward(&mut self, bottoms: &[&Blob<f32>], tops: &[&Blob<f32>]) -> blob_runtime::Result<()> {
///         let x = bottoms[0].to_vec()?;
///         tops[0].mutable_cpu_data()?.iter_mut().zip(x).for_each(|(y, x)| *y = 2.0 * x);
///         Ok(())
///     }
///     fn backward(&mut self, tops: &[&Blob<f32>], down: &[bool], bottoms: &[&Blob<f32>])
///         -> blob_runtime::Result<()> {
///         if down[0] {
///             let dy = tops[0].cpu_diff()?.to_vec();
///             bottoms[0].mutable_cpu_diff()?.iter_mut().zip(dy).for_each(|(d, g)| *d = 2.0 * g);
///         }
///         Ok(())
///     }
/// }
///
/// let mut registry = LayerRegistry::<f32>::with_caffe_layers();
/// registry.register("Double", |_param| Ok(Box::new(Double)));
/// let net = blob_layers::net::Net::from_prototxt_with(
///     "input: \"x\" input_shape { dim: 1 dim: 3 } layer { name: \"d\" type: \"Double\" bottom: \"x\" top: \"y\" }",
///     blob_layers::net::NetState::test(),
///     &registry,
/// )?;
/// net.blob("x").unwrap().mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0]);
/// let mut net = net;
/// net.forward()?;
/// assert_eq!(net.blob("y").unwrap().to_vec()?, [2.0, 4.0, 6.0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub trait DynLayer<T: MathElement>: Send {
    /// Caffe's type name, e.g. `"Convolution"`.
    fn type_name(&self) -> &str;

    /// How many bottoms it takes (Caffe's `ExactNumBottomBlobs` and
    /// kin); one by default.
    fn bottoms(&self) -> Arity {
        Arity::exactly(1)
    }

    /// How many tops it produces; one by default.
    fn tops(&self) -> Arity {
        Arity::exactly(1)
    }

    /// Caffe's `Reshape`: the tops' shapes from the bottoms' (and, for a
    /// layer whose tops the caller shapes, such as `Input`, from the tops'
    /// own). Creates the parameter blobs the first time, when they depend
    /// on the input (a convolution's channels), and refuses an input the
    /// parameters cannot take.
    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>>;

    /// Caffe's `Forward`: the tops from the bottoms. A top and a bottom
    /// may be the same blob (in place).
    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()>;

    /// Caffe's `Backward`: accumulates the parameters' gradients from the
    /// tops' diffs, and writes bottom `i`'s diff where `propagate_down[i]`.
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()>;

    /// The parameter blobs, in Caffe's order (`blobs_`: weights, then
    /// bias).
    fn blobs(&self) -> &[Blob<T>] {
        &[]
    }

    /// The parameter blobs, to load, share or move.
    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut []
    }

    /// Whether the layer's tops are the caller's to fill (`Input`, and the
    /// data layers a net built here reads that way): the net lists them
    /// as its inputs.
    fn is_input(&self) -> bool {
        false
    }

    /// Whether a solver learns blob `index` of the layer. Running
    /// statistics (BatchNorm's, the BN fork's moving mean and variance)
    /// are not learned: such a blob gets `lr_mult: 0` and `decay_mult:
    /// 0`, whatever its `param` spec says, as Caffe's BatchNorm and the
    /// fork's BN set them.
    fn learns_param(&self, _index: usize) -> bool {
        true
    }

    /// Whether `force_backward` may make bottom `i` need a gradient
    /// (Caffe's `AllowForceBackward`; a loss's labels may not).
    fn allow_force_backward(&self, _bottom: usize) -> bool {
        true
    }

    /// A loss layer: its first top gets loss weight 1 unless the
    /// prototxt says otherwise (Caffe's `LossLayer`).
    fn is_loss(&self) -> bool {
        false
    }

    /// Told, once its net is built, whether its backward pass can run
    /// there (Caffe's `layer_need_backward`): a layer may then skip
    /// keeping what only backward reads, as MAX pooling its maxima's
    /// positions or an in-place Scale a copy of its input. Called with
    /// `true` before this, and never where a layer is run by hand.
    fn backward_will_run(&mut self, _will: bool) {}

    /// Told the training iteration before each of a solver's passes
    /// and the iteration it trains to (the YOLO fork's
    /// `Layer::set_iter`), for a layer whose arithmetic follows the
    /// schedule (its `AssistedExcitation`). Most layers ignore it.
    fn set_iteration(&mut self, _iter: usize, _max_iter: usize) {}

    /// The layer as its own type, for a caller holding it through a net
    /// ([`Net::layer_mut`](crate::net::Net::layer_mut)): a layer with
    /// methods of its own (MemoryData's `reset`) returns itself; others
    /// `None`.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }

    /// Whether a top may be its own bottom. Split, Flatten, Reshape and
    /// the layers whose forward reads a bottom after writing the top say
    /// no, and the net refuses such a wiring by name.
    fn allows_in_place(&self) -> bool {
        true
    }

    /// Where this layer is an element-wise activation a layer before it
    /// can apply as it writes (Caffe's `ReLU`, leaky or not, the forks'
    /// `ReLU6`), which: a net folds it into the layer before it when that
    /// layer [`folds_activation`](Self::folds_activation) and this one
    /// runs in place on its only top.
    fn activation(&self) -> Option<Activation> {
        None
    }

    /// Whether [`forward_then`](Self::forward_then) costs less than
    /// `forward` and an activation pass of its own (a Convolution applies
    /// it as it adds its bias): a net then runs it for the layer and the
    /// in-place activation after it, and skips the activation's forward
    /// (its backward, which reads only the top, runs as before).
    fn folds_activation(&self) -> bool {
        false
    }

    /// Caffe's `Forward` followed by `activation` of the tops in place,
    /// the values the activation's layer would leave. The default runs
    /// the two passes; see [`folds_activation`](Self::folds_activation).
    ///
    /// ```
    /// use blob_layers::{Activation, registry::LayerRegistry};
    /// use blob_runtime::Blob;
    /// let reg = LayerRegistry::<f32>::with_caffe_layers();
    /// let mut shift = reg.build_text(r#"type: "Power" power_param { shift: -1 }"#)?;
    /// let (x, y) = (Blob::from_vec(&[3], vec![0.5, 1.0, 2.0])?, Blob::new(&[3])?);
    /// shift.forward_then(&[&x], &[&y], Activation::Relu)?;
    /// assert_eq!(y.to_vec()?, [0.0, 0.0, 1.0]);
    /// shift.forward_then(&[&x], &[&y], Activation::LeakyRelu { negative_slope: 0.5 })?;
    /// assert_eq!(y.to_vec()?, [-0.25, 0.0, 1.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    fn forward_then(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        activation: Activation,
    ) -> Result<()> {
        self.forward(bottoms, tops)?;
        for top in tops {
            activation.run_in_place(top)?;
        }
        Ok(())
    }

    /// Where this layer's forward pass maps each channel (axis 1) of its
    /// one bottom to `mul·x + add` with the values it holds now
    /// (BatchNorm with global statistics, a Scale learned per channel),
    /// that map; `None` by default. A net folds such layers, in place
    /// on the only top of a layer that
    /// [`folds_affine`](Self::folds_affine) and where no backward pass
    /// runs through them, into that layer's pass.
    fn channel_affine(&self) -> Option<ChannelAffine> {
        None
    }

    /// Whether [`forward_then_affine`](Self::forward_then_affine) costs
    /// less than the passes apart (a Convolution folds the map into its
    /// weights and bias).
    fn folds_affine(&self) -> bool {
        false
    }

    /// Caffe's `Forward`, then `affine` over the top's channels, then
    /// the `activation`: what the layers a net folds into this one give,
    /// within rounding. The default runs the passes one after the other.
    ///
    /// ```
    /// use blob_layers::ChannelAffine;
    /// use blob_layers::registry::LayerRegistry;
    /// use blob_runtime::Blob;
    /// let reg = LayerRegistry::<f32>::with_caffe_layers();
    /// let mut same = reg.build_text(r#"type: "Power""#)?;
    /// let (x, y) = (Blob::from_vec(&[1, 2], vec![1.0, 2.0])?, Blob::new(&[1, 2])?);
    /// let affine = ChannelAffine { mul: vec![2.0, -1.0], add: vec![0.5, 0.0] };
    /// same.forward_then_affine(&[&x], &[&y], &affine, Some(blob_layers::Activation::Relu))?;
    /// assert_eq!(y.to_vec()?, [2.5, 0.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    fn forward_then_affine(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        affine: &ChannelAffine,
        activation: Option<Activation>,
    ) -> Result<()> {
        self.forward(bottoms, tops)?;
        affine_then(tops, affine, activation)
    }

    /// Whether this layer's forward pass is the plain sum of its bottoms
    /// (Caffe's `Eltwise` SUM, every `coeff` 1): a net that
    /// [reuses memory](crate::net::Net::reuse_memory) folds such a sum
    /// of two, where one bottom is the only top of a layer that
    /// [`folds_shortcut`](Self::folds_shortcut), into that layer.
    fn sums_bottoms(&self) -> bool {
        false
    }

    /// Whether [`forward_then_shortcut`](Self::forward_then_shortcut)
    /// costs less than the passes apart (a 1x1 Convolution adds the
    /// shortcut as its product stores each value: ResNet's residual add).
    fn folds_shortcut(&self) -> bool {
        false
    }

    /// Caffe's `Forward` with `top` as the only top, then `affine` over
    /// its channels, then the `shortcut` added, then the `activation`:
    /// what the layer, the BatchNorms and Scales after it, an Eltwise SUM
    /// and a ReLU give, within the rounding of the affine map. The
    /// default runs the passes one after the other.
    ///
    /// ```
    /// use blob_layers::{Activation, Shortcut};
    /// use blob_layers::registry::LayerRegistry;
    /// use blob_runtime::Blob;
    /// let reg = LayerRegistry::<f32>::with_caffe_layers();
    /// let mut same = reg.build_text(r#"type: "Power""#)?;
    /// let (x, y) = (Blob::from_vec(&[1, 2], vec![1.0, 2.0])?, Blob::new(&[1, 2])?);
    /// let added = Blob::from_vec(&[1, 2], vec![0.5, -3.0])?;
    /// let shortcut = Shortcut { blob: &added, first: false };
    /// same.forward_then_shortcut(&[&x], &y, shortcut, None, Some(Activation::Relu))?;
    /// assert_eq!(y.to_vec()?, [1.5, 0.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    fn forward_then_shortcut(
        &mut self,
        bottoms: &[&Blob<T>],
        top: &Blob<T>,
        shortcut: Shortcut<'_, T>,
        affine: Option<&ChannelAffine>,
        activation: Option<Activation>,
    ) -> Result<()> {
        match affine {
            Some(affine) => self.forward_then_affine(bottoms, &[top], affine, None)?,
            None => self.forward(bottoms, &[top])?,
        }
        add_shortcut_then(top, shortcut, activation)
    }

    /// Whether this layer's forward pass joins its bottoms along the
    /// channel axis (Caffe's `Concat` at axis 1, two bottoms or more,
    /// these `bottoms`): a net that [reuses
    /// memory](crate::net::Net::reuse_memory) has the layers that write
    /// them [write their channels of its top](Self::forward_into_channels)
    /// instead, and the join costs nothing.
    fn joins_channels(&self, _bottoms: &[&Blob<T>]) -> bool {
        false
    }

    /// Whether [`forward_into_channels`](Self::forward_into_channels)
    /// can write this layer's only top into another blob's channels (a
    /// Convolution on the host).
    fn folds_concat(&self) -> bool {
        false
    }

    /// Caffe's `Forward` with one bottom and one top, then `affine` over
    /// its channels and the `activation`, written not into the top but
    /// into channels `first..` of `into` (a `Concat`'s top, whose other
    /// axes are the top's): image `n` of the top goes to image `n` of
    /// `into` from channel `first` on. Says whether it wrote; where it
    /// cannot, or would run slower so (a path off the host, a map it does
    /// not fold, a batch its path joins), it writes nothing and the net
    /// runs the layer as it is and copies its top into the Concat's.
    ///
    /// ```
    /// use blob_layers::registry::LayerRegistry;
    /// use blob_runtime::Blob;
    /// let reg = LayerRegistry::<f32>::with_caffe_layers();
    /// let mut conv = reg.build_text(
    ///     r#"type: "Convolution"
    ///        convolution_param { num_output: 1 kernel_size: 1
    ///          weight_filler { type: "constant" value: 2 } }"#,
    /// )?;
    /// let x = Blob::from_vec(&[1, 1, 1, 2], vec![1.0, -3.0])?;
    /// let (top, joined) = (Blob::new(&[1, 1, 1, 2])?, Blob::new(&[1, 3, 1, 2])?);
    /// conv.reshape(&[&x], &[&top])?;
    /// let relu = Some(blob_layers::Activation::Relu);
    /// assert!(conv.forward_into_channels(&[&x], (&joined, 1), None, relu)?);
    /// assert_eq!(joined.to_vec()?, [0.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    fn forward_into_channels(
        &mut self,
        _bottoms: &[&Blob<T>],
        _into: (&Blob<T>, usize),
        _affine: Option<&ChannelAffine>,
        _activation: Option<Activation>,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Where the layer runs faster with its only bottom and its only top
    /// in [`ChannelBlocks`] (an f32 Convolution on the host, 4-D, its
    /// channels in whole blocks of 16): `input`, it reads the bottom in
    /// blocks (and then writes its top in them at no cost); `output`, it
    /// writes its top in blocks at no cost from a bottom in Caffe's
    /// layout too. A net that [reuses memory](crate::net::Net::reuse_memory)
    /// hands a blob from layer to layer in blocks, as MobileNet's 1x1 and
    /// depthwise layers chain.
    fn channel_blocks(&self) -> ChannelBlocks {
        ChannelBlocks::default()
    }

    /// Whether the layer, taking [`ChannelBlocks`], runs faster with
    /// either side alone in them (a depthwise Convolution, whose window
    /// sums 16 channels of a pixel as one register), not only where the
    /// layers beside it hand them on (a 1x1 one, as fast in Caffe's
    /// layout). A net starts handing blobs on in blocks at such a layer,
    /// or into one.
    ///
    /// ```
    /// use blob_layers::registry::LayerRegistry;
    /// use blob_runtime::Blob;
    /// let reg = LayerRegistry::<f32>::with_caffe_layers();
    /// let conv = |group| {
    ///     reg.build_text(&format!(
    ///         "type: 'Convolution' convolution_param {{ num_output: 16 group: {group} \
    ///          kernel_size: 3 pad: 1 }}"
    ///     ))
    /// };
    /// let (mut depthwise, mut full) = (conv(16)?, conv(1)?);
    /// let (x, top) = (Blob::new(&[1, 16, 8, 8])?, Blob::new(&[1, 16, 8, 8])?);
    /// depthwise.reshape(&[&x], &[&top])?;
    /// full.reshape(&[&x], &[&top])?;
    /// let fast = blob_kernels::cpu::isa() >= blob_kernels::cpu::Isa::Avx2;
    /// assert_eq!(depthwise.prefers_channel_blocks(), fast);
    /// assert!(!full.prefers_channel_blocks());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    fn prefers_channel_blocks(&self) -> bool {
        false
    }

    /// The layout of the next passes' bottom and top: Caffe's, or, where
    /// set, 16 channels side by side ([`ChannelBlocks`]). A layer that
    /// [takes none](Self::channel_blocks) leaves them Caffe's.
    fn set_channel_blocks(&mut self, _blocks: ChannelBlocks) {}

    /// Lets the layer's cuDNN convolutions run f32 on TF32 tensor cores
    /// (Ampere and later GPUs): faster, with inputs rounded to a 10-bit
    /// mantissa (about 1e-3 relative off f32). Off by default, so a GPU
    /// matches the CPU within 1e-5; on is what Caffe (cuDNN's default
    /// math) and PyTorch (`torch.backends.cudnn.allow_tf32`) do. Layers
    /// without such math ignore it; see
    /// [`Net::allow_tf32`](crate::net::Net::allow_tf32).
    fn allow_tf32(&mut self, _allowed: bool) {}
}

/// `affine`, then the `activation`, over each top in place: the layers
/// a net folds, run apart.
pub(crate) fn affine_then<T: MathElement>(
    tops: &[&Blob<T>],
    affine: &ChannelAffine,
    activation: Option<Activation>,
) -> Result<()> {
    for top in tops {
        affine.apply(top)?;
        if let Some(activation) = activation {
            activation.run_in_place(top)?;
        }
    }
    Ok(())
}

/// What a net's Eltwise SUM adds to a layer's only top when the net
/// folds the sum into the layer ([`DynLayer::forward_then_shortcut`]):
/// ResNet's shortcut into the residual branch.
///
/// ```
/// use blob_layers::Shortcut;
/// use blob_runtime::Blob;
/// let added = Blob::<f32>::from_vec(&[2], vec![1.0, 2.0])?;
/// let shortcut = Shortcut { blob: &added, first: true };
/// assert_eq!(shortcut.blob.count(), 2);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Shortcut<'a, T: MathElement> {
    /// The Eltwise's other bottom, of the top's shape.
    pub blob: &'a Blob<T>,
    /// Whether it is the Eltwise's first bottom: Caffe's SUM is a zero
    /// fill and an axpy a bottom, `(0 + first) + second`, whose bits
    /// depend on the order at -0.
    pub first: bool,
}

/// `top` plus `shortcut` in Caffe's order, then the `activation`, in
/// place: the passes a layer that cannot add the shortcut as it writes
/// runs after its own (on the host, where a net folds shortcuts).
pub(crate) fn add_shortcut_then<T: MathElement>(
    top: &Blob<T>,
    shortcut: Shortcut<'_, T>,
    activation: Option<Activation>,
) -> Result<()> {
    if shortcut.blob.shape() != top.shape() {
        return Err(bad_param(
            "add a shortcut",
            format!(
                "the shortcut's shape {} is not the output's {}",
                shortcut.blob.shape_string(),
                top.shape_string()
            ),
        ));
    }
    let added = shortcut.blob.cpu_data()?;
    let mut y = top.mutable_cpu_data()?;
    let (y, first) = (&mut y[..], shortcut.first);
    // One loop a variant, the choice outside it, so that it vectorises.
    match activation {
        None => sum_then(y, &added, first, |v| v),
        Some(Activation::Relu) => sum_then(y, &added, first, Rectify::apply),
        Some(Activation::Relu6) => sum_then(y, &added, first, relu6),
        Some(Activation::LeakyRelu { negative_slope }) => {
            sum_then(y, &added, first, |v| leaky(negative_slope, v))
        }
    }
    Ok(())
}

/// `y = then(y + added)`, the sum in Caffe's Eltwise order (`added`
/// first where `first`).
fn sum_then<T: MathElement>(y: &mut [T], added: &[T], first: bool, then: impl Fn(T) -> T) {
    blob_kernels::cpu::vectorized(
        #[inline(always)]
        || {
            for (v, &s) in y.iter_mut().zip(added) {
                let sum = if first {
                    (T::ZERO + s) + *v
                } else {
                    (T::ZERO + *v) + s
                };
                *v = then(sum);
            }
        },
    )
}

/// The error of a layer built from a bad parameter.
pub(crate) fn bad_param(op: &'static str, detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op,
        detail: detail.into(),
    }
}

/// Each value of `blob` as an index below `n` (a label, a row, an
/// item); the first that is not a whole number in `0..n` is an error of
/// `op` in the words `refusal(position, value)` gives.
pub(crate) fn indices_below<T: MathElement>(
    op: &'static str,
    blob: &Blob<T>,
    n: usize,
    refusal: impl Fn(usize, f64) -> String,
) -> Result<Vec<usize>> {
    blob.cpu_data()?
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let v = v.to_f64();
            if v >= 0.0 && v.fract() == 0.0 && (v as usize) < n {
                Ok(v as usize)
            } else {
                Err(bad_param(op, refusal(i, v)))
            }
        })
        .collect()
}

/// A layer's typed parameter message, or its defaults where absent.
pub(crate) fn sub_param(layer: &ParamMessage, name: &str) -> ParamMessage {
    layer.message(name).cloned().unwrap_or_else(|| {
        match layer.schema().field(name).map(|f| f.kind) {
            Some(blob_proto::schema::FieldKind::Message(m)) => ParamMessage::new(m),
            _ => panic!("LayerParameter has no message {name} (a typo in blobflow's code)"),
        }
    })
}

/// Whether the layer runs in Caffe's TRAIN phase.
pub(crate) fn is_train(layer: &ParamMessage) -> bool {
    layer.enum_name("phase") == "TRAIN"
}

/// A bottom's axis index, counted from the end when negative (Caffe's
/// `CanonicalAxisIndex`), as an error naming the layer's parameter.
pub(crate) fn axis_of<T: MathElement>(
    blob: &Blob<T>,
    axis: i64,
    what: &'static str,
) -> Result<usize> {
    let rank = blob.num_axes() as i64;
    let canonical = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&canonical) {
        return Err(bad_param(
            what,
            format!(
                "axis {axis} is out of range for a {rank}-D input of shape {}",
                blob.shape_string()
            ),
        ));
    }
    Ok(canonical as usize)
}

/// One top shaped as the first bottom: what element-wise layers reshape
/// to.
pub(crate) fn like_first_bottom<T: MathElement>(bottoms: &[&Blob<T>]) -> Vec<TopShape> {
    vec![TopShape::new(bottoms[0].shape().to_vec())]
}

/// The layout of a layer's bottom and top between two layers of a net
/// ([`DynLayer::set_channel_blocks`]): where set, each image's channels
/// in blocks of 16, a block's pixels one after another with its 16
/// channels side by side (`value[((n C/16 + b) H W + p) 16 + l]` is
/// channel `16 b + l` of pixel `p`), the layout the inference engines
/// call NCHW16c. A depthwise layer then reads each pixel's 16 channels
/// as one register, and a 1x1 layer broadcasts its inputs from them; the
/// blob's shape stays Caffe's.
///
/// ```
/// use blob_layers::ChannelBlocks;
/// let blocks = ChannelBlocks { input: true, output: false };
/// assert!(blocks.any() && !ChannelBlocks::default().any());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelBlocks {
    /// The bottom (or, from [`DynLayer::channel_blocks`], whether the
    /// layer reads one so).
    pub input: bool,
    /// The top (or whether the layer writes one so from Caffe's layout).
    pub output: bool,
}

impl ChannelBlocks {
    /// Whether either side is in blocks.
    pub fn any(self) -> bool {
        self.input || self.output
    }
}
