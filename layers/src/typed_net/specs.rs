//! The built-in layers as a typed net declares them: each one's Caffe
//! type, output shape (computed from its bottoms' at compile time) and
//! parameter fields.

use std::fmt::Write as _;

use blob_runtime::typed::{
    D, Dim, DimAdd, DimSub, Dyn, Minus, Plus, Rank2, Rank4, SameAs, Shape, Thousands,
};

use super::{Filler, Four, LayerFields, LayerSpec, Mult, One, Three, Two};
use crate::shapes::{AtLeast, ConvDim, ConvOut, ConvShape, PoolShape};

/// The dims of an `(N, C, H, W)` shape, by axis.
type BatchOf<X> = <<X as Shape>::Dims as Rank4>::A0;
type HeightOf<X> = <<X as Shape>::Dims as Rank4>::A2;
type WidthOf<X> = <<X as Shape>::Dims as Rank4>::A3;

/// What a layer with weights and a bias declares beside them.
#[derive(Clone, Debug, Default)]
struct Learned {
    weight_filler: Option<Filler>,
    bias_filler: Option<Filler>,
    mults: Vec<Mult>,
    bias_term: Option<bool>,
}

impl Learned {
    fn write_params(&self, text: &mut String) {
        for m in &self.mults {
            let _ = write!(text, "{m} ");
        }
    }

    fn write_inner(&self, text: &mut String) {
        if let Some(b) = self.bias_term {
            let _ = write!(text, " bias_term: {b}");
        }
        if let Some(f) = &self.weight_filler {
            let _ = write!(text, " weight_filler {{ {f} }}");
        }
        if let Some(f) = &self.bias_filler {
            let _ = write!(text, " bias_filler {{ {f} }}");
        }
    }
}

/// A convolution's settings as numbers: `[outputs, kernel, stride, pad]`
/// square, or outputs and each axis's kernel, stride, pad and dilation.
#[derive(Clone, Copy, Debug)]
enum ConvSettings {
    Square([usize; 4]),
    PerAxis([usize; 9]),
}

/// A convolution's fields, for every setting one type (`Conv` and `ConvHW`
/// hand these out): its `param`s, then `convolution_param` with its
/// geometry, group and fillers.
#[derive(Clone, Debug)]
struct ConvFields {
    settings: ConvSettings,
    learned: Learned,
    group: Option<usize>,
}

impl ConvFields {
    fn new(settings: ConvSettings) -> Self {
        Self {
            settings,
            learned: Learned::default(),
            group: None,
        }
    }
}

impl LayerFields for ConvFields {
    fn type_name(&self) -> &str {
        "Convolution"
    }
    fn write_fields(&self, text: &mut String) {
        self.learned.write_params(text);
        let _ = match self.settings {
            ConvSettings::Square([cout, k, s, p]) => write!(
                text,
                "convolution_param {{ num_output: {cout} kernel_size: {k} stride: {s} pad: {p}"
            ),
            ConvSettings::PerAxis([cout, kh, kw, sh, sw, ph, pw, dh, dw]) => write!(
                text,
                "convolution_param {{ num_output: {cout} kernel_h: {kh} kernel_w: {kw} \
                 stride_h: {sh} stride_w: {sw} pad_h: {ph} pad_w: {pw} dilation: {dh} dilation: {dw}"
            ),
        };
        if let Some(g) = self.group {
            let _ = write!(text, " group: {g}");
        }
        self.learned.write_inner(text);
        text.push_str(" }");
    }
}

/// `LayerFields` for a layer generic over its settings, through fields
/// of one type for every setting (its `fields`): the text is written by
/// code compiled once, not once a setting.
macro_rules! fields_of_every_setting {
    (impl[$($generics:tt)*] $ty:ty) => {
        impl<$($generics)*> LayerFields for $ty {
            fn type_name(&self) -> &str {
                self.fields.type_name()
            }
            fn write_fields(&self, text: &mut String) {
                self.fields.write_fields(text);
            }
            fn as_fields(&self) -> &dyn LayerFields {
                &self.fields
            }
        }
    };
}

/// The builder methods of a layer with weights and a bias.
macro_rules! learned_methods {
    () => {
        /// Caffe's `weight_filler`.
        pub fn weight_filler(mut self, filler: Filler) -> Self {
            self.fields.learned.weight_filler = Some(filler);
            self
        }
        /// Caffe's `bias_filler`.
        pub fn bias_filler(mut self, filler: Filler) -> Self {
            self.fields.learned.bias_filler = Some(filler);
            self
        }
        /// The `lr_mult`/`decay_mult` of the weights and of the bias
        /// (Caffe's two `param { }` fields).
        pub fn mults(mut self, weights: Mult, bias: Mult) -> Self {
            self.fields.learned.mults = vec![weights, bias];
            self
        }
        /// Caffe's `bias_term`: `false` for a layer without a bias (as
        /// ResNet's convolutions).
        pub fn bias_term(mut self, bias: bool) -> Self {
            self.fields.learned.bias_term = Some(bias);
            self
        }
    };
}

/// Caffe `Convolution` with `COUT` outputs, a `K` x `K` kernel, stride `S`
/// and pad `P`: `(N, C, H, W)` to `(N, COUT, (H + 2P - K) / S + 1, ...)`.
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Image = _, 3, 32, 32);
/// let mut n = NetSpec::<f32>::new("n");
/// let x = n.input::<Image>("x");
/// let y = n.add("conv1", &x, Conv::<32, 5, 1, 2>::new().weight_filler(Filler::gaussian(0.0, 1e-4)));
/// let y: Top<f32, (Dyn, D<32>, D<32>, D<32>)> = y;
/// # let _ = y;
/// ```
#[derive(Clone, Debug)]
pub struct Conv<const COUT: usize, const K: usize, const S: usize = 1, const P: usize = 0> {
    fields: ConvFields,
}

impl<const COUT: usize, const K: usize, const S: usize, const P: usize> Conv<COUT, K, S, P> {
    /// The layer with Caffe's defaults.
    pub fn new() -> Self {
        Self {
            fields: ConvFields::new(ConvSettings::Square([COUT, K, S, P])),
        }
    }
    learned_methods!();
    /// Caffe's `group`: channels split in `group` independent
    /// convolutions (both channel counts must divide by it, checked when
    /// the net is built).
    pub fn group(mut self, group: usize) -> Self {
        self.fields.group = Some(group);
        self
    }
}

impl<const COUT: usize, const K: usize, const S: usize, const P: usize> Default
    for Conv<COUT, K, S, P>
{
    fn default() -> Self {
        Self::new()
    }
}

fields_of_every_setting!(
    impl[const COUT: usize, const K: usize, const S: usize, const P: usize] Conv<COUT, K, S, P>
);

impl<X, const COUT: usize, const K: usize, const S: usize, const P: usize> LayerSpec<One<X>>
    for Conv<COUT, K, S, P>
where
    X: ConvShape<COUT, K, S, P>,
{
    type Out = ConvOut<X, COUT, K, S, P>;
}

/// Caffe `Convolution` with a rectangular kernel `KH` x `KW`, stride
/// `SH`, `SW`, pad `PH`, `PW` and dilation `DH`, `DW` per axis (Caffe's
/// `kernel_h`/`kernel_w`, `stride_h`/`stride_w`, `pad_h`/`pad_w`,
/// `dilation`), as Inception's 1x7 and 7x1 or DeepLab's atrous 3x3.
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Grid = _, 8, 17, 17);
/// let mut n = NetSpec::<f32>::new("n");
/// let x = n.input::<Grid>("x");
/// let y: Top<f32, (Dyn, D<4>, D<17>, D<17>)> =
///     n.add("1x7", &x, ConvHW::<4, 1, 7, 1, 1, 0, 3>::new());
/// let z: Top<f32, (Dyn, D<4>, D<9>, D<17>)> =
///     n.add("3x1/2", &y, ConvHW::<4, 3, 1, 2, 1, 1, 0>::new());
/// // Atrous: a 3x3 kernel at dilation 2, padded 2, keeps 17 x 17.
/// let a: Top<f32, (Dyn, D<4>, D<17>, D<17>)> =
///     n.add("atrous", &y, ConvHW::<4, 3, 3, 1, 1, 2, 2, 2, 2>::new());
/// # let _ = (z, a);
/// ```
#[derive(Clone, Debug)]
pub struct ConvHW<
    const COUT: usize,
    const KH: usize,
    const KW: usize,
    const SH: usize = 1,
    const SW: usize = 1,
    const PH: usize = 0,
    const PW: usize = 0,
    const DH: usize = 1,
    const DW: usize = 1,
> {
    fields: ConvFields,
}

impl<
    const COUT: usize,
    const KH: usize,
    const KW: usize,
    const SH: usize,
    const SW: usize,
    const PH: usize,
    const PW: usize,
    const DH: usize,
    const DW: usize,
> ConvHW<COUT, KH, KW, SH, SW, PH, PW, DH, DW>
{
    /// The layer with Caffe's defaults.
    pub fn new() -> Self {
        let settings = ConvSettings::PerAxis([COUT, KH, KW, SH, SW, PH, PW, DH, DW]);
        Self {
            fields: ConvFields::new(settings),
        }
    }
    learned_methods!();
    /// Caffe's `group` (checked when the net is built).
    pub fn group(mut self, group: usize) -> Self {
        self.fields.group = Some(group);
        self
    }
}

impl<
    const COUT: usize,
    const KH: usize,
    const KW: usize,
    const SH: usize,
    const SW: usize,
    const PH: usize,
    const PW: usize,
    const DH: usize,
    const DW: usize,
> Default for ConvHW<COUT, KH, KW, SH, SW, PH, PW, DH, DW>
{
    fn default() -> Self {
        Self::new()
    }
}

fields_of_every_setting!(
    impl[
        const COUT: usize,
        const KH: usize,
        const KW: usize,
        const SH: usize,
        const SW: usize,
        const PH: usize,
        const PW: usize,
        const DH: usize,
        const DW: usize,
    ] ConvHW<COUT, KH, KW, SH, SW, PH, PW, DH, DW>
);

impl<
    X: Shape,
    const COUT: usize,
    const KH: usize,
    const KW: usize,
    const SH: usize,
    const SW: usize,
    const PH: usize,
    const PW: usize,
    const DH: usize,
    const DW: usize,
> LayerSpec<One<X>> for ConvHW<COUT, KH, KW, SH, SW, PH, PW, DH, DW>
where
    X::Dims: Rank4,
    HeightOf<X>: ConvDim<KH, SH, PH, DH>,
    WidthOf<X>: ConvDim<KW, SW, PW, DW>,
{
    type Out = (
        BatchOf<X>,
        D<COUT>,
        <HeightOf<X> as ConvDim<KH, SH, PH, DH>>::Out,
        <WidthOf<X> as ConvDim<KW, SW, PW, DW>>::Out,
    );
}

/// Caffe `InnerProduct` (fully connected) with `N` outputs: `(B, ...)` flattened to
/// `(B, K)`, to `(B, N)`.
#[derive(Clone, Debug)]
pub struct Fc<const N: usize> {
    fields: FcFields,
}

/// An inner product's fields, for every output count one type.
#[derive(Clone, Debug)]
struct FcFields {
    outputs: usize,
    learned: Learned,
}

impl LayerFields for FcFields {
    fn type_name(&self) -> &str {
        "InnerProduct"
    }
    fn write_fields(&self, text: &mut String) {
        self.learned.write_params(text);
        let _ = write!(text, "inner_product_param {{ num_output: {}", self.outputs);
        self.learned.write_inner(text);
        text.push_str(" }");
    }
}

impl<const N: usize> Fc<N> {
    /// The layer with Caffe's defaults.
    pub fn new() -> Self {
        Self {
            fields: FcFields {
                outputs: N,
                learned: Learned::default(),
            },
        }
    }
    learned_methods!();
}

impl<const N: usize> Default for Fc<N> {
    fn default() -> Self {
        Self::new()
    }
}

fields_of_every_setting!(impl[const N: usize] Fc<N>);

impl<X: FcInput, const N: usize> LayerSpec<One<X>> for Fc<N> {
    type Out = (<X as FcInput>::Batch, D<N>);
}

fn pool_method(max: bool) -> &'static str {
    if max { "MAX" } else { "AVE" }
}

/// `Self` can feed an inner product: at least 2 axes, the first the
/// batch. The product of the others (Caffe's K) is the weights' concern,
/// checked when the net is built, so it has no compile-time limit: VGG's
/// fc6 reads `(N, 512, 7, 7)`, K = 25088.
#[diagnostic::on_unimplemented(
    message = "an inner product (Fc) cannot take {Self}: it needs at least 2 axes",
    label = "needs (N, ...) with at least one axis after the batch"
)]
pub trait FcInput: Shape {
    /// The batch dim, kept in the output `(N, outputs)`.
    type Batch: Dim;
}

/// A dim list of 2 axes or more, its first dim named.
pub trait TwoAxesOrMore {
    /// Axis 0.
    type First: Dim;
}

macro_rules! two_axes_or_more {
    ($($rest:ident),+) => {
        impl<A: Dim, $($rest: Dim),+> TwoAxesOrMore for (A, $($rest,)+) {
            type First = A;
        }
    };
}
two_axes_or_more!(B);
two_axes_or_more!(B, C);
two_axes_or_more!(B, C, E);
two_axes_or_more!(B, C, E, F);
two_axes_or_more!(B, C, E, F, G);

#[diagnostic::do_not_recommend]
impl<X: Shape> FcInput for X
where
    X::Dims: TwoAxesOrMore,
{
    type Batch = <X::Dims as TwoAxesOrMore>::First;
}

/// Caffe `Pooling` over `K` x `K` windows at stride `S` with pad `P`,
/// Caffe's ceil rule: `(N, C, H, W)` to
/// `(N, C, ceil((H + 2P - K) / S) + 1, ...)` (one less where the last
/// window would start in the padding, as Caffe).
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Features = _, 192, 28, 28);
/// let mut n = NetSpec::<f32>::new("n");
/// let x = n.input::<Features>("x");
/// let same: Top<f32, (Dyn, D<192>, D<28>, D<28>)> = n.add("pool", &x, Pool::<3, 1, 1>::max());
/// let half: Top<f32, (Dyn, D<192>, D<14>, D<14>)> = n.add("pool2", &x, Pool::<3, 2>::max());
/// # let _ = (same, half);
/// ```
#[derive(Clone, Debug)]
pub struct Pool<const K: usize, const S: usize, const P: usize = 0> {
    fields: PoolFields,
}

/// A pooling's fields, for every window one type: MAX or not, then
/// kernel, stride and pad.
#[derive(Clone, Debug)]
struct PoolFields {
    max: bool,
    window: [usize; 3],
}

impl LayerFields for PoolFields {
    fn type_name(&self) -> &str {
        "Pooling"
    }
    fn write_fields(&self, text: &mut String) {
        let [k, s, p] = self.window;
        let _ = write!(
            text,
            "pooling_param {{ pool: {} kernel_size: {k} stride: {s} pad: {p} }}",
            pool_method(self.max)
        );
    }
}

impl<const K: usize, const S: usize, const P: usize> Pool<K, S, P> {
    /// `pool: MAX`.
    pub fn max() -> Self {
        Self {
            fields: PoolFields {
                max: true,
                window: [K, S, P],
            },
        }
    }
    /// `pool: AVE`.
    pub fn ave() -> Self {
        Self {
            fields: PoolFields {
                max: false,
                window: [K, S, P],
            },
        }
    }
}

fields_of_every_setting!(impl[const K: usize, const S: usize, const P: usize] Pool<K, S, P>);

impl<X, const K: usize, const S: usize, const P: usize> LayerSpec<One<X>> for Pool<K, S, P>
where
    X: PoolShape<K, S, P>,
{
    type Out = <X as PoolShape<K, S, P>>::Out;
}

/// Caffe `Pooling` with `global_pooling`: `(N, C, H, W)` to
/// `(N, C, 1, 1)`.
#[derive(Clone, Debug)]
pub struct GlobalPool {
    max: bool,
}

impl GlobalPool {
    /// `pool: MAX`.
    pub fn max() -> Self {
        Self { max: true }
    }
    /// `pool: AVE`.
    pub fn ave() -> Self {
        Self { max: false }
    }
}

impl LayerFields for GlobalPool {
    fn type_name(&self) -> &str {
        "Pooling"
    }
    fn write_fields(&self, text: &mut String) {
        let _ = write!(
            text,
            "pooling_param {{ pool: {} global_pooling: true }}",
            pool_method(self.max)
        );
    }
}

impl<X: Shape> LayerSpec<One<X>> for GlobalPool
where
    X::Dims: Rank4,
{
    type Out = (<X::Dims as Rank4>::A0, <X::Dims as Rank4>::A1, D<1>, D<1>);
}

/// A layer that keeps its input's shape, with its parameter fields.
macro_rules! same_shape_layer {
    ($(#[$doc:meta])* $name:ident, $type:literal, in_place: $in_place:literal,
     |$self:ident, $text:ident| $write:block) => {
        impl LayerFields for $name {
            fn type_name(&self) -> &str {
                $type
            }
            fn in_place(&self) -> bool {
                $in_place
            }
            fn write_fields(&$self, $text: &mut String) $write
        }

        impl<X: Shape> LayerSpec<One<X>> for $name {
            type Out = X;
        }
    };
}

/// Caffe's element-wise ("neuron") layers without parameters to learn:
/// `ReLU` (and leaky), `Sigmoid`, `TanH`, `Dropout`, `ELU`, `Power`,
/// `AbsVal`, `BNLL`, `Exp`, `Log`, `Threshold`, `Clip`. The shape is kept;
/// given its bottom by value, a layer that Caffe may run in place does.
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Hidden = _, 8);
/// let mut n = NetSpec::<f32>::new("n");
/// let x = n.input::<Hidden>("x");
/// let y = n.add("relu", x, Neuron::relu());
/// let y = n.add("drop", y, Neuron::dropout(0.5));
/// assert_eq!(y.name(), "x"); // both in place
/// let z = n.add("abs", y, Neuron::abs_val());
/// assert_eq!(z.name(), "abs"); // its backward reads its input: never in place
/// ```
#[derive(Clone, Debug)]
pub struct Neuron {
    type_name: &'static str,
    fields: String,
    in_place: bool,
}

impl Neuron {
    fn of(type_name: &'static str, fields: String, in_place: bool) -> Self {
        Self {
            type_name,
            fields,
            in_place,
        }
    }
    /// Caffe `ReLU`: `max(x, 0)`.
    pub fn relu() -> Self {
        Self::of("ReLU", String::new(), true)
    }
    /// Caffe `ReLU` with `negative_slope`: `x < 0` maps to `slope * x`
    /// (in place for a slope of at least 0).
    pub fn leaky_relu(slope: f64) -> Self {
        let fields = format!("relu_param {{ negative_slope: {slope} }}");
        Self::of("ReLU", fields, slope >= 0.0)
    }
    /// Caffe `Sigmoid`.
    pub fn sigmoid() -> Self {
        Self::of("Sigmoid", String::new(), true)
    }
    /// Caffe `TanH`.
    pub fn tanh() -> Self {
        Self::of("TanH", String::new(), true)
    }
    /// Caffe `Dropout`: drops a `ratio` of the values in training.
    pub fn dropout(ratio: f64) -> Self {
        let fields = format!("dropout_param {{ dropout_ratio: {ratio} }}");
        Self::of("Dropout", fields, true)
    }
    /// Caffe `ELU` (`alpha`; in place for an alpha of at least 0).
    pub fn elu(alpha: f64) -> Self {
        Self::of(
            "ELU",
            format!("elu_param {{ alpha: {alpha} }}"),
            alpha >= 0.0,
        )
    }
    /// Caffe `Power`: `(shift + scale x) ^ power`.
    pub fn power(power: f64, scale: f64, shift: f64) -> Self {
        let fields = format!("power_param {{ power: {power} scale: {scale} shift: {shift} }}");
        Self::of("Power", fields, false)
    }
    /// Caffe `AbsVal`: `|x|`.
    pub fn abs_val() -> Self {
        Self::of("AbsVal", String::new(), false)
    }
    /// Caffe `BNLL`: `log(1 + exp(x))`.
    pub fn bnll() -> Self {
        Self::of("BNLL", String::new(), false)
    }
    /// Caffe `Exp`: `base ^ (shift + scale x)` (`base` -1: e).
    pub fn exp(base: f64, scale: f64, shift: f64) -> Self {
        let fields = format!("exp_param {{ base: {base} scale: {scale} shift: {shift} }}");
        Self::of("Exp", fields, true)
    }
    /// Caffe `Log`: `log_base(shift + scale x)` (`base` -1: e).
    pub fn log(base: f64, scale: f64, shift: f64) -> Self {
        let fields = format!("log_param {{ base: {base} scale: {scale} shift: {shift} }}");
        Self::of("Log", fields, false)
    }
    /// Caffe `Threshold`: 1 above `threshold`, else 0.
    pub fn threshold(threshold: f64) -> Self {
        let fields = format!("threshold_param {{ threshold: {threshold} }}");
        Self::of("Threshold", fields, true)
    }
    /// Caffe `Clip` to `[min, max]` (ReLU6 is `clip(0.0, 6.0)`).
    pub fn clip(min: f64, max: f64) -> Self {
        let fields = format!("clip_param {{ min: {min} max: {max} }}");
        Self::of("Clip", fields, false)
    }
}

impl LayerFields for Neuron {
    fn type_name(&self) -> &str {
        self.type_name
    }
    fn in_place(&self) -> bool {
        self.in_place
    }
    fn write_fields(&self, text: &mut String) {
        text.push_str(&self.fields);
    }
}

impl<X: Shape> LayerSpec<One<X>> for Neuron {
    type Out = X;
}

/// Caffe `PReLU`: a learned slope for negatives, per channel or shared.
#[derive(Clone, Debug, Default)]
pub struct PReLU {
    channel_shared: bool,
    filler: Option<Filler>,
}

impl PReLU {
    /// One slope per channel, Caffe's default start (0.25).
    pub fn new() -> Self {
        Self::default()
    }
    /// One slope for every channel.
    pub fn channel_shared(mut self) -> Self {
        self.channel_shared = true;
        self
    }
    /// How the slopes start.
    pub fn filler(mut self, filler: Filler) -> Self {
        self.filler = Some(filler);
        self
    }
}

same_shape_layer!(PReLU, "PReLU", in_place: false, |self, text| {
    let _ = write!(text, "prelu_param {{ channel_shared: {}", self.channel_shared);
    if let Some(f) = &self.filler {
        let _ = write!(text, " filler {{ {f} }}");
    }
    text.push_str(" }");
});

/// Caffe `LRN` across channels (or within a channel).
#[derive(Clone, Debug)]
pub struct LRN {
    local_size: usize,
    alpha: f64,
    beta: f64,
    within_channel: bool,
}

impl LRN {
    /// `ACROSS_CHANNELS` with `local_size`, `alpha`, `beta`.
    pub fn across_channels(local_size: usize, alpha: f64, beta: f64) -> Self {
        Self {
            local_size,
            alpha,
            beta,
            within_channel: false,
        }
    }
    /// `WITHIN_CHANNEL` with `local_size`, `alpha`, `beta`.
    pub fn within_channel(local_size: usize, alpha: f64, beta: f64) -> Self {
        Self {
            within_channel: true,
            ..Self::across_channels(local_size, alpha, beta)
        }
    }
}

same_shape_layer!(LRN, "LRN", in_place: false, |self, text| {
    let region = if self.within_channel {
        "WITHIN_CHANNEL"
    } else {
        "ACROSS_CHANNELS"
    };
    let _ = write!(
        text,
        "lrn_param {{ local_size: {} alpha: {} beta: {} norm_region: {region} }}",
        self.local_size, self.alpha, self.beta
    );
});

/// Caffe `Softmax` over the channel axis: class probabilities (the
/// `prob` of deploy nets).
#[derive(Clone, Copy, Debug, Default)]
pub struct Prob;
same_shape_layer!(Prob, "Softmax", in_place: false, |self, _text| {});

/// Caffe `BatchNorm`: batch statistics in training, the moving averages
/// in test (or always, with `use_global_stats`); in place when given its
/// bottom by value.
#[derive(Clone, Debug, Default)]
pub struct BatchNorm {
    use_global_stats: Option<bool>,
    eps: Option<f64>,
}

impl BatchNorm {
    /// Caffe's defaults (statistics follow the phase, `eps` 1e-5).
    pub fn new() -> Self {
        Self::default()
    }
    /// Caffe's `use_global_stats`.
    pub fn use_global_stats(mut self, global: bool) -> Self {
        self.use_global_stats = Some(global);
        self
    }
    /// Caffe's `eps`.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = Some(eps);
        self
    }
}

same_shape_layer!(BatchNorm, "BatchNorm", in_place: true, |self, text| {
    text.push_str("batch_norm_param {");
    if let Some(g) = self.use_global_stats {
        let _ = write!(text, " use_global_stats: {g}");
    }
    if let Some(e) = self.eps {
        let _ = write!(text, " eps: {e}");
    }
    text.push_str(" }");
});

/// Caffe `Scale` with one learned factor per channel (and a bias with
/// [`Scale::with_bias`]); in place when given its bottom by value.
#[derive(Clone, Debug, Default)]
pub struct Scale {
    bias_term: bool,
}

impl Scale {
    /// Factors only.
    pub fn new() -> Self {
        Self::default()
    }
    /// Factors and a bias per channel (`bias_term: true`), as ResNet's.
    pub fn with_bias() -> Self {
        Self { bias_term: true }
    }
}

same_shape_layer!(Scale, "Scale", in_place: true, |self, text| {
    let _ = write!(text, "scale_param {{ bias_term: {} }}", self.bias_term);
});

/// Caffe `Flatten`: `(N, ...)` to `(N, product of the rest)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flatten;

impl LayerFields for Flatten {
    fn type_name(&self) -> &str {
        "Flatten"
    }
    fn write_fields(&self, _text: &mut String) {}
}

impl<X: blob_runtime::typed::Flatten> LayerSpec<One<X>> for Flatten {
    type Out = blob_runtime::typed::Flat<X>;
}

/// Caffe `Reshape` (and `Flatten`) into a shape you name: the element
/// count must be the same at compile time (the run-time dim, the batch,
/// carries over). A declared shape's count has no limit, so VGG's
/// `(N, 512, 7, 7)` flattens into a declared `(N, 25088)`.
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Pool5 = _, 512, 7, 7);
/// blob_runtime::blob!(pub shape Pool5Flat = _, 25088);
/// let mut n = NetSpec::<f32>::new("n");
/// let x = n.input::<Pool5>("pool5");
/// let flat: Top<f32, Pool5Flat> = n.add("flatten", &x, ReshapeAs::<Pool5Flat>::new());
/// let net = n.batch(2).build(blob_layers::net::NetState::test())?;
/// assert_eq!(flat.blob(&net)?.shape(), &[2, 25088]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct ReshapeAs<S> {
    fields: ReshapeFields,
    _shape: std::marker::PhantomData<fn() -> S>,
}

/// A reshape's fields, for every shape one type: the dims, `None` for the
/// run-time one.
struct ReshapeFields {
    dims: &'static [Option<usize>],
}

impl LayerFields for ReshapeFields {
    fn type_name(&self) -> &str {
        "Reshape"
    }
    fn write_fields(&self, text: &mut String) {
        // A run-time dim is inferred (-1): the counts agree, so it is the
        // batch wherever it sits.
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| format!("dim: {}", d.map_or(-1, |d| d as i64)))
            .collect();
        let _ = write!(text, "reshape_param {{ shape {{ {} }} }}", dims.join(" "));
    }
}

impl<S: Shape> ReshapeAs<S> {
    /// The layer.
    pub fn new() -> Self {
        use blob_runtime::typed::DimList;
        Self {
            fields: ReshapeFields {
                dims: S::Dims::STATIC_DIMS,
            },
            _shape: std::marker::PhantomData,
        }
    }
}

impl<S: Shape> Default for ReshapeAs<S> {
    fn default() -> Self {
        Self::new()
    }
}

fields_of_every_setting!(impl[S: Shape] ReshapeAs<S>);

impl<X: blob_runtime::typed::ReshapeInto<S>, S: Shape> LayerSpec<One<X>> for ReshapeAs<S> {
    type Out = S;
}

/// `Self` and `Other` can be combined element by element: one shape.
#[diagnostic::on_unimplemented(
    message = "Eltwise combines blobs of one shape, but is given {Other} and {Self}",
    label = "shapes differ",
    note = "each bottom of an Eltwise must have the same dims: a residual branch must end in the shape it started from"
)]
pub trait EltwiseOperand<Other: Shape>: Shape {}

#[diagnostic::do_not_recommend]
impl<X: Shape, Y: Shape> EltwiseOperand<Y> for X where Y::Dims: SameAs<X::Dims> {}

/// Caffe `Eltwise`: `SUM` (with coefficients), `PROD` or `MAX` of blobs
/// of one shape.
#[derive(Clone, Debug)]
pub struct Eltwise {
    op: &'static str,
    coeffs: Vec<f64>,
}

impl Eltwise {
    /// `operation: SUM`.
    pub fn sum() -> Self {
        Self {
            op: "SUM",
            coeffs: Vec::new(),
        }
    }
    /// `SUM` with one coefficient per bottom (`coeff`).
    pub fn weighted_sum(coeffs: &[f64]) -> Self {
        Self {
            op: "SUM",
            coeffs: coeffs.to_vec(),
        }
    }
    /// `operation: PROD`.
    pub fn prod() -> Self {
        Self {
            op: "PROD",
            coeffs: Vec::new(),
        }
    }
    /// `operation: MAX`.
    pub fn max() -> Self {
        Self {
            op: "MAX",
            coeffs: Vec::new(),
        }
    }
    fn write(&self, text: &mut String) {
        let _ = write!(text, "eltwise_param {{ operation: {}", self.op);
        for c in &self.coeffs {
            let _ = write!(text, " coeff: {c}");
        }
        text.push_str(" }");
    }
}

impl LayerFields for Eltwise {
    fn type_name(&self) -> &str {
        "Eltwise"
    }
    fn write_fields(&self, text: &mut String) {
        self.write(text);
    }
}

impl<X: Shape, Y: EltwiseOperand<X>> LayerSpec<Two<X, Y>> for Eltwise {
    type Out = X;
}

impl<X: Shape, Y: EltwiseOperand<X>, Z: EltwiseOperand<X>> LayerSpec<Three<X, Y, Z>> for Eltwise {
    type Out = X;
}

impl<X: Shape, Y: EltwiseOperand<X>, Z: EltwiseOperand<X>, V: EltwiseOperand<X>>
    LayerSpec<Four<X, Y, Z, V>> for Eltwise
{
    type Out = X;
}

/// `Self` and `Other`, shapes of one rank, can be joined on axis `AXIS`:
/// equal on every other axis, the joined dims added (two run-time dims
/// give a run-time dim).
#[diagnostic::on_unimplemented(
    message = "Concat cannot join {Self} and {Other} on axis {AXIS}",
    label = "not equal outside axis {AXIS}, or no axis {AXIS}",
    note = "Concat (axis {AXIS}) joins bottoms of one rank (2 to 4 axes, more than {AXIS}) equal on every other axis; on axis {AXIS}, two compile-time dims or two run-time ones (`_`)"
)]
pub trait ConcatOn<const AXIS: usize, Other: Shape>: Shape {
    /// The joined shape.
    type Out: Shape;
}

#[diagnostic::do_not_recommend]
impl<X: Shape, Y: Shape, const AXIS: usize> ConcatOn<AXIS, Y> for X
where
    X::Dims: JoinOn<AXIS, Y::Dims>,
{
    type Out = <X::Dims as JoinOn<AXIS, Y::Dims>>::Out;
}

/// Dim lists joined on axis `AXIS`: [`ConcatOn`] on the dims.
#[diagnostic::on_unimplemented(
    message = "Concat cannot join {Self} and {Other} on axis {AXIS}",
    label = "not equal outside axis {AXIS}, or no axis {AXIS}",
    note = "Concat (axis {AXIS}) joins bottoms of one rank (2 to 4 axes, more than {AXIS}) equal on every other axis; on axis {AXIS}, two compile-time dims or two run-time ones (`_`)"
)]
pub trait JoinOn<const AXIS: usize, Other> {
    /// The joined dims.
    type Out: Shape;
}

/// Two dims on a concat axis: their sum at compile time, or a run-time
/// dim for two run-time ones (a static and a run-time dim do not join).
pub trait JoinedDim<Other: Dim>: Dim {
    /// The joined dim.
    type Out: Dim;
}

impl<const A: usize, const B: usize> JoinedDim<D<B>> for D<A>
where
    D<A>: DimAdd<D<B>>,
{
    type Out = Plus<D<A>, D<B>>;
}

impl<const A: usize, H, L> JoinedDim<Thousands<H, L>> for D<A>
where
    Thousands<H, L>: Dim,
    D<A>: DimAdd<Thousands<H, L>>,
{
    type Out = Plus<D<A>, Thousands<H, L>>;
}

impl<H, L, const B: usize> JoinedDim<D<B>> for Thousands<H, L>
where
    Thousands<H, L>: DimAdd<D<B>>,
{
    type Out = Plus<Thousands<H, L>, D<B>>;
}

impl<H, L, H2, L2> JoinedDim<Thousands<H2, L2>> for Thousands<H, L>
where
    Thousands<H2, L2>: Dim,
    Thousands<H, L>: DimAdd<Thousands<H2, L2>>,
{
    type Out = Plus<Thousands<H, L>, Thousands<H2, L2>>;
}

impl JoinedDim<Dyn> for Dyn {
    type Out = Dyn;
}

/// `JoinOn<axis>` for one rank: the dims before the axis, the axis, the
/// dims after, each as (this list's, the other list's).
macro_rules! join_on {
    ($axis:literal: ($(($a:ident, $b:ident)),*), ($j:ident, $k:ident), ($(($c:ident, $d:ident)),*)) => {
        #[diagnostic::do_not_recommend]
        impl<$($a: Dim, $b: Dim,)* $j: JoinedDim<$k>, $k: Dim, $($c: Dim, $d: Dim,)*>
            JoinOn<$axis, ($($b,)* $k, $($d,)*)> for ($($a,)* $j, $($c,)*)
        where
            $($b: SameAs<$a>,)*
            $($d: SameAs<$c>,)*
        {
            type Out = ($($a,)* <$j as JoinedDim<$k>>::Out, $($c,)*);
        }
    };
}

join_on!(0: (), (A, A2), ());
join_on!(0: (), (A, A2), ((B, B2)));
join_on!(1: ((A, A2)), (B, B2), ());
join_on!(0: (), (A, A2), ((B, B2), (C, C2)));
join_on!(1: ((A, A2)), (B, B2), ((C, C2)));
join_on!(2: ((A, A2), (B, B2)), (C, C2), ());
join_on!(0: (), (A, A2), ((B, B2), (C, C2), (E, E2)));
join_on!(1: ((A, A2)), (B, B2), ((C, C2), (E, E2)));
join_on!(2: ((A, A2), (B, B2)), (C, C2), ((E, E2)));
join_on!(3: ((A, A2), (B, B2), (C, C2)), (E, E2), ());

/// Caffe `Concat` on its default axis, the channels (axis 1), of two to
/// four bottoms of 2 to 4 axes (`(N, C)`, `(N, C, H, W)`), the channels
/// added up at compile time. [`ConcatAxis`] joins on another axis.
#[derive(Clone, Copy, Debug, Default)]
pub struct Concat;

/// Caffe `Concat` with `concat_param { axis: AXIS }` (SSD joins its prior
/// boxes, `(1, 2, K)` each, on axis 2): the bottoms' dims on that axis
/// added up at compile time, equal on every other.
///
/// ```
/// use blob_layers::typed_net::*;
/// blob_runtime::blob!(pub shape Near = 1, 2, 64);
/// blob_runtime::blob!(pub shape Far = 1, 2, 16);
/// let mut n = NetSpec::<f32>::new("priors");
/// let (near, far) = (n.input::<Near>("near"), n.input::<Far>("far"));
/// let all = n.add("priors", (&near, &far), ConcatAxis::<2>);
/// let _: &Top<f32, (D<1>, D<2>, D<80>)> = &all;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ConcatAxis<const AXIS: usize>;

impl LayerFields for Concat {
    fn type_name(&self) -> &str {
        "Concat"
    }
    fn write_fields(&self, _text: &mut String) {}
}

impl<const AXIS: usize> LayerFields for ConcatAxis<AXIS> {
    fn type_name(&self) -> &str {
        "Concat"
    }
    fn write_fields(&self, text: &mut String) {
        let _ = write!(text, "concat_param {{ axis: {AXIS} }}");
    }
}

type Joined<X, Y, const AXIS: usize> = <X as ConcatOn<AXIS, Y>>::Out;

/// Two to four bottoms joined on `$axis`, for `$spec`.
macro_rules! concat_specs {
    ($spec:ty, $axis:tt $(, $generic:tt)?) => {
        impl<$(const $generic: usize,)? X: ConcatOn<$axis, Y>, Y: Shape> LayerSpec<Two<X, Y>> for $spec {
            type Out = Joined<X, Y, $axis>;
        }

        impl<$(const $generic: usize,)? X, Y: Shape, Z: Shape> LayerSpec<Three<X, Y, Z>> for $spec
        where
            X: ConcatOn<$axis, Y>,
            Joined<X, Y, $axis>: ConcatOn<$axis, Z>,
        {
            type Out = Joined<Joined<X, Y, $axis>, Z, $axis>;
        }

        impl<$(const $generic: usize,)? X, Y: Shape, Z: Shape, V: Shape> LayerSpec<Four<X, Y, Z, V>> for $spec
        where
            X: ConcatOn<$axis, Y>,
            Joined<X, Y, $axis>: ConcatOn<$axis, Z>,
            Joined<Joined<X, Y, $axis>, Z, $axis>: ConcatOn<$axis, V>,
        {
            type Out = Joined<Joined<Joined<X, Y, $axis>, Z, $axis>, V, $axis>;
        }
    };
}

concat_specs!(Concat, 1);
concat_specs!(ConcatAxis<AXIS>, AXIS, AXIS);

/// `Self` splits at `POINT` on axis `AXIS` (Caffe `Slice` with
/// `slice_param { axis: AXIS slice_point: POINT }`): `0 < POINT < dim`,
/// the dim known at compile time.
#[diagnostic::on_unimplemented(
    message = "Slice cannot split {Self} at {POINT} on axis {AXIS}",
    label = "no such split",
    note = "Slice (axis {AXIS}) needs bottoms of 2 to 4 axes, more than {AXIS}, whose dim on axis {AXIS} is static and above POINT, with POINT > 0"
)]
pub trait SliceOn<const AXIS: usize, const POINT: usize>: Shape {
    /// The first part: `POINT` on the axis.
    type First: Shape;
    /// The rest: the dim less `POINT` on the axis.
    type Rest: Shape;
}

#[diagnostic::do_not_recommend]
impl<X: Shape, const AXIS: usize, const POINT: usize> SliceOn<AXIS, POINT> for X
where
    X::Dims: SplitOn<AXIS, POINT>,
{
    type First = <X::Dims as SplitOn<AXIS, POINT>>::First;
    type Rest = <X::Dims as SplitOn<AXIS, POINT>>::Rest;
}

/// A dim list split on axis `AXIS` at `POINT`: [`SliceOn`] on the dims.
#[diagnostic::on_unimplemented(
    message = "Slice cannot split {Self} at {POINT} on axis {AXIS}",
    label = "no such split",
    note = "Slice (axis {AXIS}) needs bottoms of 2 to 4 axes, more than {AXIS}, whose dim on axis {AXIS} is static and above POINT, with POINT > 0"
)]
pub trait SplitOn<const AXIS: usize, const POINT: usize> {
    /// The first part's dims.
    type First: Shape;
    /// The rest's dims.
    type Rest: Shape;
}

/// `SplitOn<axis>` for one rank: the dims before the axis, the axis, the
/// dims after.
macro_rules! split_on {
    ($axis:literal: ($($a:ident),*), $j:ident, ($($c:ident),*)) => {
        #[diagnostic::do_not_recommend]
        impl<$($a: Dim,)* $j: DimSub<D<POINT>>, $($c: Dim,)* const POINT: usize> SplitOn<$axis, POINT>
            for ($($a,)* $j, $($c,)*)
        where
            Minus<$j, D<POINT>>: AtLeast<D<1>, Bit = D<1>>,
            D<POINT>: AtLeast<D<1>, Bit = D<1>>,
        {
            type First = ($($a,)* D<POINT>, $($c,)*);
            type Rest = ($($a,)* Minus<$j, D<POINT>>, $($c,)*);
        }
    };
}

split_on!(0: (), A, (B));
split_on!(1: (A), B, ());
split_on!(0: (), A, (B, C));
split_on!(1: (A), B, (C));
split_on!(2: (A, B), C, ());
split_on!(0: (), A, (B, C, E));
split_on!(1: (A), B, (C, E));
split_on!(2: (A, B), C, (E));
split_on!(3: (A, B, C), E, ());

/// `Self` holds the labels of scores `X`: `(N,)`, one class index per
/// item of scores `(N, C)`.
#[diagnostic::on_unimplemented(
    message = "labels {Self} do not fit scores {Scores} (the layer takes the scores first, then the labels)",
    label = "not the labels of these scores",
    note = "Caffe's labels are one class index per item: (N,) for scores (N, C), not one-hot (N, C)"
)]
pub trait LabelsFor<Scores: Shape>: Shape {}

#[diagnostic::do_not_recommend]
impl<L: Shape, X: Shape> LabelsFor<X> for L
where
    X::Dims: Rank2,
    L::Dims: SameAs<(<X::Dims as Rank2>::A0,)>,
{
}

/// Caffe `SoftmaxWithLoss` of scores `(N, C)` and labels `(N,)`: a loss
/// (weight 1), a scalar top.
#[derive(Clone, Copy, Debug, Default)]
pub struct SoftmaxLoss;

impl SoftmaxLoss {
    /// The layer.
    pub fn new() -> Self {
        Self
    }
}

impl LayerFields for SoftmaxLoss {
    fn type_name(&self) -> &str {
        "SoftmaxWithLoss"
    }
    fn write_fields(&self, _text: &mut String) {}
}

impl<X: Shape, L: LabelsFor<X>> LayerSpec<Two<X, L>> for SoftmaxLoss {
    type Out = ();
}

/// Caffe `Accuracy` of scores `(N, C)` against labels `(N,)` (`top_k`).
#[derive(Clone, Copy, Debug)]
pub struct Accuracy {
    top_k: usize,
}

impl Accuracy {
    /// The share of items whose label is among the `k` best scores.
    pub fn top(k: usize) -> Self {
        Self { top_k: k }
    }
}

impl LayerFields for Accuracy {
    fn type_name(&self) -> &str {
        "Accuracy"
    }
    fn write_fields(&self, text: &mut String) {
        let _ = write!(text, "accuracy_param {{ top_k: {} }}", self.top_k);
    }
}

impl<X: Shape, L: LabelsFor<X>> LayerSpec<Two<X, L>> for Accuracy {
    type Out = ();
}
