//! Caffe's Convolution as a run-time layer: its `convolution_param` read
//! when the net is built, its weights shaped by the first input.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::ConvGeometry;
use super::engine::{ConvEngine, EngineChoice};
use super::volume::VolumeGeometry;
use crate::Activation;
use crate::dyn_layer::{Arity, DynLayer, Shortcut, TopShape, bad_param, is_train, sub_param};
use crate::layer::Result;
use crate::{ChannelAffine, ChannelBlocks};

const OP: &str = "set up Convolution";

/// A `convolution_param` as Convolution and Deconvolution read it. The
/// per-axis settings are resolved once the input's rank says how many
/// spatial axes there are ([`window`](Self::window)).
pub(crate) struct ConvParam {
    pub num_output: usize,
    pub group: usize,
    pub bias_term: bool,
    /// The channel axis (Caffe's `axis`, negative from the end).
    pub axis: i64,
    kernel: PerAxis,
    stride: PerAxis,
    pad: PerAxis,
    dilation: PerAxis,
    pub weight_filler: ParamMessage,
    pub bias_filler: ParamMessage,
    pub choice: EngineChoice,
    /// `engine: CAFFE`: Caffe's own sums, nothing folded in.
    pub own_engine: bool,
}

/// Caffe `Convolution` over any number of spatial axes (those after
/// `axis`, the channels): bottom `i` to top `i`, all with the same weights
/// `(num_output, C / group, kernel...)` and, with `bias_term`, bias
/// `(num_output)`. Two spatial axes or fewer run on the planar engine
/// (CPU, CUDA, cuDNN), more on the volume engine (CPU, CUDA).
pub(crate) struct ConvolutionLayer<T: MathElement> {
    p: ConvParam,
    /// The zeros a convolution without bias adds, on the input's device.
    zero_bias: Blob<T>,
    blobs: Vec<Blob<T>>,
    engine: ConvEngine<T>,
    /// The last input planned (its shape, and the input channels of the
    /// weights then) and its plan. A net reshapes every layer before each
    /// pass, as Caffe does, and the layer plans again in its passes:
    /// planning each time (the window, the checks, the shapes' vectors)
    /// took a tenth of MTCNN P-Net's 11 us pass at 12 x 12.
    last_plan: Option<(Vec<usize>, Option<usize>, Planned)>,
    /// The weights and bias with a folded channel map in them, and what
    /// they were made from.
    folded: Folded<T>,
    /// The layout of the next passes' bottom and top
    /// ([`DynLayer::set_channel_blocks`]).
    blocks: ChannelBlocks,
}

/// A convolution's weights and bias times a [`ChannelAffine`]'s factors,
/// its terms added to the bias: `mul·(W·x + b) + add` as `(mul·W)·x +
/// (mul·b + add)`. Remade when the weights, the bias or the map change
/// (the blobs' write stamps, the map's values); on the input's device.
#[derive(Default)]
struct Folded<T: MathElement> {
    made_from: Option<(u64, u64, ChannelAffine)>,
    weights: Blob<T>,
    bias: Blob<T>,
}

/// A per-axis setting as written: a list (none, once, or once per spatial
/// axis) or, for kernel, stride and pad, an `_h`/`_w` pair (2-D only).
enum PerAxis {
    List(&'static str, Vec<usize>, usize),
    Pair(&'static str, [usize; 2]),
}

impl PerAxis {
    /// Reads `name` (or its `prefix_h`/`prefix_w` pair) with Caffe's
    /// rules; `default` stands for a setting not given.
    fn read(
        param: &ParamMessage,
        name: &'static str,
        prefix: Option<&str>,
        default: usize,
    ) -> Result<Self> {
        let size = |v: u64| {
            usize::try_from(v).map_err(|_| bad_param(OP, format!("{name} {v} is too large")))
        };
        let list = param
            .uints(name)
            .into_iter()
            .map(size)
            .collect::<Result<Vec<_>>>()?;
        let Some(prefix) = prefix else {
            return Ok(Self::List(name, list, default));
        };
        let (h, w) = (format!("{prefix}_h"), format!("{prefix}_w"));
        if !param.has(&h) && !param.has(&w) {
            return Ok(Self::List(name, list, default));
        }
        if !list.is_empty() {
            return Err(bad_param(
                OP,
                format!("{name} is {name} OR {h} and {w}; not both"),
            ));
        }
        // One of the pair alone leaves the other at 0, as in Caffe: fine
        // for a pad, refused for a kernel or stride.
        Ok(Self::Pair(
            name,
            [size(param.uint(&h))?, size(param.uint(&w))?],
        ))
    }

    /// The values as given (the default where none is).
    fn given(&self) -> Vec<usize> {
        match self {
            Self::List(_, list, default) if list.is_empty() => vec![*default],
            Self::List(_, list, _) => list.clone(),
            Self::Pair(_, pair) => pair.to_vec(),
        }
    }

    /// The value for each of `axes` spatial axes.
    fn for_axes(&self, axes: usize) -> Result<Vec<usize>> {
        match self {
            Self::List(_, list, default) if list.is_empty() => Ok(vec![*default; axes]),
            Self::List(_, list, _) if list.len() == 1 => Ok(vec![list[0]; axes]),
            Self::List(_, list, _) if list.len() == axes => Ok(list.clone()),
            Self::List(name, list, _) => Err(bad_param(
                OP,
                format!(
                    "{name} must be specified once, or once per spatial dimension ({} given for {axes})",
                    list.len()
                ),
            )),
            Self::Pair(_, pair) if axes == 2 => Ok(pair.to_vec()),
            Self::Pair(name, _) => Err(bad_param(
                OP,
                format!(
                    "{name}'s _h and _w can only be used for 2D convolution, not over {axes} spatial axes"
                ),
            )),
        }
    }
}

/// Kernel, stride, pad and dilation for each spatial axis of an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub pad: Vec<usize>,
    pub dilation: Vec<usize>,
}

impl Window {
    /// The kernel's extent along axis `a`: `dilation (kernel - 1) + 1`
    /// (checked: the settings come from a file).
    pub(crate) fn extent(&self, a: usize) -> Result<usize> {
        self.dilation[a]
            .checked_mul(self.kernel[a] - 1)
            .and_then(|e| e.checked_add(1))
            .ok_or_else(|| {
                bad_param(
                    OP,
                    format!(
                        "a dilated kernel of {} x {} overflows",
                        self.kernel[a], self.dilation[a]
                    ),
                )
            })
    }

    /// Twice the pad along axis `a`, checked.
    pub(crate) fn both_pads(&self, a: usize) -> Result<usize> {
        self.pad[a]
            .checked_mul(2)
            .ok_or_else(|| bad_param(OP, format!("pad {} overflows", self.pad[a])))
    }

    /// The settings on two axes, a missing leading axis (a 1-D or 0-D
    /// convolution) as one of size 1 with a 1-wide kernel: the planar
    /// engine's.
    fn planar(&self) -> ([usize; 2], [usize; 2], [usize; 2], [usize; 2]) {
        let two = |v: &[usize], fill: usize| match v {
            [a, b] => [*a, *b],
            [b] => [fill, *b],
            _ => [fill, fill],
        };
        (
            two(&self.kernel, 1),
            two(&self.stride, 1),
            two(&self.pad, 0),
            two(&self.dilation, 1),
        )
    }
}

fn joined(v: &[usize]) -> String {
    v.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(" x ")
}

impl ConvParam {
    /// Reads the layer's `convolution_param`; `op` names the layer type
    /// in errors.
    pub(crate) fn from_layer(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "convolution_param");
        let num_output = p.uint("num_output") as usize;
        if num_output == 0 {
            return Err(bad_param(OP, "num_output must be set and positive"));
        }
        let kernel = PerAxis::read(&p, "kernel_size", Some("kernel"), 0)?;
        let stride = PerAxis::read(&p, "stride", Some("stride"), 1)?;
        let pad = PerAxis::read(&p, "pad", Some("pad"), 0)?;
        let dilation = PerAxis::read(&p, "dilation", None, 1)?;
        let (k, s, d) = (kernel.given(), stride.given(), dilation.given());
        if [&k, &s, &d].iter().any(|v| v.contains(&0)) {
            return Err(bad_param(
                OP,
                format!(
                    "kernel ({}), stride ({}) and dilation ({}) must be positive",
                    joined(&k),
                    joined(&s),
                    joined(&d)
                ),
            ));
        }
        let group = p.uint("group") as usize;
        if group == 0 || !num_output.is_multiple_of(group) {
            return Err(bad_param(
                OP,
                format!("num_output {num_output} is not a multiple of group {group}"),
            ));
        }
        // Caffe's own engine: im2col on both sides.
        let own_engine = p.enum_name("engine") == "CAFFE";
        Ok(Self {
            num_output,
            group,
            bias_term: p.boolean("bias_term"),
            axis: p.int("axis"),
            kernel,
            stride,
            pad,
            dilation,
            weight_filler: sub_param(&p, "weight_filler"),
            bias_filler: sub_param(&p, "bias_filler"),
            choice: EngineChoice {
                winograd: !own_engine,
                winograd_wide: !own_engine && !is_train(layer),
                #[cfg(feature = "cudnn")]
                use_cudnn: !own_engine,
                #[cfg(feature = "cudnn")]
                allow_tf32: false,
            },
            own_engine,
        })
    }

    /// Where `x`'s channels are (`axis`, counted from the end when
    /// negative); the spatial axes follow it.
    pub(crate) fn channel_axis<T: MathElement>(&self, x: &Blob<T>) -> Result<usize> {
        let rank = x.shape().len();
        usize::try_from(self.axis)
            .ok()
            .filter(|&a| a < rank)
            .or_else(|| {
                let back = self
                    .axis
                    .checked_neg()
                    .and_then(|b| usize::try_from(b).ok())?;
                rank.checked_sub(back)
            })
            .ok_or_else(|| {
                bad_param(
                    "convolve",
                    format!(
                        "axis {} is not an axis of the input {}",
                        self.axis,
                        x.shape_string()
                    ),
                )
            })
    }

    /// The settings for `axes` spatial axes.
    pub(crate) fn window(&self, axes: usize) -> Result<Window> {
        Ok(Window {
            kernel: self.kernel.for_axes(axes)?,
            stride: self.stride.for_axes(axes)?,
            pad: self.pad.for_axes(axes)?,
            dilation: self.dilation.for_axes(axes)?,
        })
    }

    /// The planar convolution of `batch` images of `cin` channels and
    /// `size` (height, width) through `window` (two spatial axes or
    /// fewer).
    pub(crate) fn geometry(
        &self,
        batch: usize,
        cin: usize,
        size: [usize; 2],
        window: &Window,
    ) -> ConvGeometry {
        let (kernel, stride, pad, dilation) = window.planar();
        let out = |a: usize| {
            ConvGeometry::output_size(size[a], kernel[a], stride[a], pad[a], dilation[a])
        };
        ConvGeometry {
            batch,
            channels_in: cin,
            channels_out: self.num_output,
            h: size[0],
            w: size[1],
            oh: out(0),
            ow: out(1),
            kernel,
            stride,
            pad,
            dilation,
        }
    }

    /// The weights (and, with `bias_term`, the bias of `bias_len`) of
    /// `weight_shape`, drawn from the fillers.
    pub(crate) fn fresh_blobs<T: MathElement>(
        &self,
        weight_shape: &[usize],
        bias_len: usize,
    ) -> Result<Vec<Blob<T>>> {
        let weight = Blob::new(weight_shape)?;
        crate::filler::fill(&weight, &self.weight_filler)?;
        let mut blobs = vec![weight];
        if self.bias_term {
            let bias = Blob::new(&[bias_len])?;
            crate::filler::fill(&bias, &self.bias_filler)?;
            blobs.push(bias);
        }
        Ok(blobs)
    }
}

/// How one input is convolved: on the planar engine (two spatial axes or
/// fewer, the batch being every axis before the channels), or over three
/// or more spatial axes (Caffe's `im2col_nd`).
#[derive(Clone)]
pub(crate) enum Plan {
    Planar(ConvGeometry),
    Volume(VolumeGeometry),
}

/// Sizes on at most two spatial axes as the planar engine's (height,
/// width): a missing leading axis is 1 high.
pub(crate) fn planar_size(sizes: &[usize]) -> [usize; 2] {
    match *sizes {
        [h, w] => [h, w],
        [w] => [1, w],
        _ => [1, 1],
    }
}

/// A checked input's plan, its top shape and its weights' shape.
#[derive(Clone)]
pub(crate) struct Planned {
    pub plan: Plan,
    pub top: Vec<usize>,
    pub weights: Vec<usize>,
}

impl ConvParam {
    /// Checks `x` against these settings and `weights_in` (the input
    /// channels the weights were made for, once they exist), and plans
    /// its convolution: Caffe's `LayerSetUp` and `Reshape` checks.
    pub(crate) fn plan<T: MathElement>(
        &self,
        x: &Blob<T>,
        weights_in: Option<usize>,
    ) -> Result<Planned> {
        let s = x.shape();
        let axis = self.channel_axis(x)?;
        let (cin, spatial) = (s[axis], &s[axis + 1..]);
        let window = self.window(spatial.len())?;
        if !cin.is_multiple_of(self.group) {
            return Err(bad_param(
                "convolve",
                format!(
                    "the input's {cin} channels are not a multiple of group {}",
                    self.group
                ),
            ));
        }
        let want = weights_in.unwrap_or(cin);
        if cin != want {
            return Err(bad_param(
                "convolve",
                format!(
                    "Input size incompatible with convolution kernel: the input {} has {cin} channels, the weights {want}",
                    x.shape_string()
                ),
            ));
        }
        let mut out = Vec::with_capacity(spatial.len());
        for (a, &size) in spatial.iter().enumerate() {
            let (extent, pads) = (window.extent(a)?, window.both_pads(a)?);
            let padded = size.checked_add(pads).filter(|&p| p >= extent).ok_or_else(|| {
                bad_param(
                    "convolve",
                    format!(
                        "the input {} is {size} along axis {}, where the kernel (extent {extent}, pad {}) needs at least {}",
                        x.shape_string(),
                        axis + 1 + a,
                        window.pad[a],
                        extent.saturating_sub(pads)
                    ),
                )
            })?;
            out.push((padded - extent) / window.stride[a] + 1);
        }
        let batch = s[..axis].iter().product();
        let top = [&s[..axis], &[self.num_output], &out[..]].concat();
        let weights = [&[self.num_output, cin / self.group], &window.kernel[..]].concat();
        let plan = match spatial.len() {
            0..=2 => Plan::Planar(self.geometry(batch, cin, planar_size(spatial), &window)),
            _ => Plan::Volume(VolumeGeometry {
                batch,
                groups: self.group,
                channels_in: cin,
                channels_out: self.num_output,
                input: spatial.to_vec(),
                output: out,
                window,
            }),
        };
        Ok(Planned { plan, top, weights })
    }
}

impl<T: MathElement> ConvolutionLayer<T> {
    /// The geometry last planned, where the layer takes
    /// [`ChannelBlocks`]: a depthwise or 1x1 layer over 4-D f32 blobs,
    /// its channels in whole blocks
    /// ([`blocks_suit`](super::channel_blocks::blocks_suit)), or a net's
    /// first layer that writes them
    /// ([`first_layer_suits`](super::channel_blocks::first_layer_suits)).
    fn blocked_geometry(&self) -> Option<&ConvGeometry> {
        match &self.last_plan {
            Some((
                shape,
                _,
                Planned {
                    plan: Plan::Planar(g),
                    ..
                },
            )) if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
                && shape.len() == 4
                && matches!(self.p.axis, 1 | -3)
                && (super::channel_blocks::blocks_suit(g, self.p.group)
                    || super::channel_blocks::first_layer_suits(g, self.p.group)) =>
            {
                Some(g)
            }
            _ => None,
        }
    }

    /// Reads the layer's `convolution_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        Ok(Self {
            p: ConvParam::from_layer(layer)?,
            zero_bias: Blob::default(),
            blobs: Vec::new(),
            engine: ConvEngine::default(),
            last_plan: None,
            folded: Folded::default(),
            blocks: ChannelBlocks::default(),
        })
    }

    /// `x`'s plan: the last one where `x` has the same shape and the
    /// weights the same input channels, else a new one (kept).
    fn plan(&mut self, x: &Blob<T>) -> Result<&Planned> {
        let weights_in = self.blobs.first().map(|w| w.shape()[1] * self.p.group);
        let current = matches!(&self.last_plan,
            Some((shape, w, _)) if shape.as_slice() == x.shape() && *w == weights_in);
        if !current {
            let planned = self.p.plan(x, weights_in)?;
            self.last_plan = Some((x.shape().to_vec(), weights_in, planned));
        }
        self.last_plan
            .as_ref()
            .map(|(_, _, planned)| planned)
            .ok_or_else(|| bad_param("convolve", "no plan was kept"))
    }
}

/// A convolution's weights, and its bias (`zero` without `bias_term`).
fn weight_and_bias<'a, T: MathElement>(
    blobs: &'a [Blob<T>],
    zero: &'a Blob<T>,
    bias_term: bool,
) -> (&'a Blob<T>, &'a Blob<T>) {
    (&blobs[0], if bias_term { &blobs[1] } else { zero })
}

impl<T: MathElement> ConvolutionLayer<T> {
    /// Caffe's `Forward`, then the `shortcut` added and the `activation`
    /// over each top in place, applied as the bias is added where the
    /// path can, from the layer's weights or (`folded`) from
    /// [`Folded`]'s.
    fn forward_finished(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        activation: Option<Activation>,
        folded: bool,
        shortcut: Option<Shortcut<'_, T>>,
    ) -> Result<()> {
        self.place_zero_bias(bottoms[0])?;
        for (x, y) in bottoms.iter().zip(tops) {
            let plan = self.plan(x)?.plan.clone();
            let (w, b) = if folded {
                (&self.folded.weights, &self.folded.bias)
            } else {
                weight_and_bias(&self.blobs, &self.zero_bias, self.p.bias_term)
            };
            match plan {
                Plan::Planar(g) if self.blocks.any() && shortcut.is_none() => {
                    let (group, choice) = (self.p.group, self.p.choice);
                    let blobs = (*x, w, b, *y);
                    self.engine.forward_blocked(
                        &g,
                        group,
                        choice,
                        blobs,
                        activation,
                        self.blocks,
                    )?
                }
                Plan::Planar(g) => {
                    let (group, choice) = (self.p.group, self.p.choice);
                    let finish = (activation, shortcut);
                    self.engine
                        .forward_grouped(&g, group, choice, (x, w, b, y), finish)?
                }
                Plan::Volume(g) => {
                    self.engine.forward_volume(&g, x, w, b, y)?;
                    match shortcut {
                        Some(shortcut) => {
                            crate::dyn_layer::add_shortcut_then(y, shortcut, activation)?
                        }
                        None => {
                            if let Some(activation) = activation {
                                activation.run_in_place(y)?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether `affine` folds into the weights and bias for a pass over
    /// `bottoms`: not with `engine: CAFFE`, and only a map of the
    /// layer's output channels.
    fn folds_map(&self, affine: &ChannelAffine, bottoms: &[&Blob<T>]) -> bool {
        !self.p.own_engine && affine.channels() == self.p.num_output && !bottoms.is_empty()
    }

    /// Makes [`Folded`]'s weights and bias for `affine` on `x`'s device,
    /// unless those of the same weights, bias and map are still there.
    fn fold(&mut self, x: &Blob<T>, affine: &ChannelAffine) -> Result<()> {
        self.place_zero_bias(x)?;
        let (w, b) = weight_and_bias(&self.blobs, &self.zero_bias, self.p.bias_term);
        let (w_shape, b_shape) = (w.shape().to_vec(), b.shape().to_vec());
        let stamps = |f: &Folded<T>| (f.weights.data().write_stamp(), f.bias.data().write_stamp());
        let before = stamps(&self.folded);
        crate::softmax::place_with(&mut self.folded.weights, x, &w_shape)?;
        crate::softmax::place_with(&mut self.folded.bias, x, &b_shape)?;
        let sources = (w.data().write_stamp(), b.data().write_stamp());
        // Placing them elsewhere (another device, another size) makes
        // new blobs, with new stamps.
        if let Some((ws, bs, map)) = &self.folded.made_from
            && (*ws, *bs) == sources
            && map == affine
            && stamps(&self.folded) == before
        {
            return Ok(());
        }
        {
            let (weights, bias) = (w.cpu_data()?, b.cpu_data()?);
            let per_output = weights.len() / self.p.num_output.max(1);
            let mut folded = self.folded.weights.mutable_cpu_data()?;
            for (o, (from, to)) in weights
                .chunks(per_output.max(1))
                .zip(folded.chunks_mut(per_output.max(1)))
                .enumerate()
            {
                let m = affine.mul[o];
                for (t, f) in to.iter_mut().zip(from) {
                    *t = T::from_f64(m * f.to_f64());
                }
            }
            let mut folded = self.folded.bias.mutable_cpu_data()?;
            for (o, (t, f)) in folded.iter_mut().zip(bias.iter()).enumerate() {
                *t = T::from_f64(affine.mul[o] * f.to_f64() + affine.add[o]);
            }
        }
        self.folded.made_from = Some((sources.0, sources.1, affine.clone()));
        Ok(())
    }

    /// Without `bias_term`, zeros of `num_output` on `x`'s device (its
    /// gradient, accumulated by the passes, is never read).
    fn place_zero_bias(&mut self, x: &Blob<T>) -> Result<()> {
        if self.p.bias_term {
            return Ok(());
        }
        let fresh = self.zero_bias.count() != self.p.num_output;
        crate::softmax::place_with(&mut self.zero_bias, x, &[self.p.num_output])?;
        if fresh {
            self.zero_bias.mutable_cpu_data()?.fill(T::ZERO);
        }
        Ok(())
    }
}

impl<T: MathElement> DynLayer<T> for ConvolutionLayer<T> {
    fn type_name(&self) -> &str {
        "Convolution"
    }

    #[cfg_attr(not(feature = "cudnn"), allow(unused_variables))]
    fn allow_tf32(&mut self, allowed: bool) {
        #[cfg(feature = "cudnn")]
        {
            self.p.choice.allow_tf32 = allowed;
        }
    }

    fn bottoms(&self) -> Arity {
        Arity::at_least(1)
    }

    fn tops(&self) -> Arity {
        Arity::at_least(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if bottoms.iter().any(|b| b.shape() != bottoms[0].shape()) {
            return Err(bad_param("convolve", "all inputs must have the same shape"));
        }
        let fresh = self.blobs.is_empty();
        let planned = self.plan(bottoms[0])?;
        let (top, weights) = (planned.top.clone(), fresh.then(|| planned.weights.clone()));
        if let Some(weights) = weights {
            self.blobs = self.p.fresh_blobs(&weights, self.p.num_output)?;
        }
        Ok(vec![TopShape::new(top); bottoms.len()])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.forward_finished(bottoms, tops, None, false, None)
    }

    fn folds_activation(&self) -> bool {
        true
    }

    /// A depthwise or 1x1 layer over 4-D f32 blobs, its channels in whole
    /// blocks ([`blocks_suit`](super::channel_blocks::blocks_suit)), as
    /// last planned; a 1x1 layer writes blocks from Caffe's planes too
    /// (its tiles broadcast from either), as does a depthwise one of
    /// MobileNet's 3 x 3 window (laying its input in blocks first, a
    /// block whole or a row at a time); any other depthwise one would
    /// transpose its output. A net's first layer of that window writes
    /// blocks from its few planes.
    fn channel_blocks(&self) -> ChannelBlocks {
        let Some(g) = self.blocked_geometry() else {
            return ChannelBlocks::default();
        };
        if super::channel_blocks::first_layer_suits(g, self.p.group) {
            return ChannelBlocks {
                input: false,
                output: true,
            };
        }
        let depthwise = g.is_depthwise(self.p.group);
        ChannelBlocks {
            input: true,
            output: !depthwise || super::depthwise::mobilenet_window(g),
        }
    }

    /// A depthwise layer in blocks: each pixel's channels are one register
    /// of its window's sums, so the layer gains from blocks on either side
    /// alone, where a 1x1 layer runs as fast in Caffe's layout.
    fn prefers_channel_blocks(&self) -> bool {
        self.blocked_geometry()
            .is_some_and(|g| g.is_depthwise(self.p.group))
    }

    fn set_channel_blocks(&mut self, blocks: ChannelBlocks) {
        self.blocks = blocks;
    }

    fn forward_then(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        activation: Activation,
    ) -> Result<()> {
        self.forward_finished(bottoms, tops, Some(activation), false, None)
    }

    /// Not with `engine: CAFFE`, which keeps Caffe's own sums.
    fn folds_affine(&self) -> bool {
        !self.p.own_engine
    }

    /// The map folded into the weights and bias (remade only when they
    /// or the map change), then the pass with the activation as the bias
    /// is added: the layers' values within rounding.
    fn forward_then_affine(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        affine: &ChannelAffine,
        activation: Option<Activation>,
    ) -> Result<()> {
        if !self.folds_map(affine, bottoms) {
            // The map runs over Caffe's layout: the top goes into blocks
            // after it.
            let blocks = self.blocks;
            self.blocks.output = false;
            let ran = self.forward(bottoms, tops);
            self.blocks = blocks;
            ran?;
            crate::dyn_layer::affine_then(tops, affine, activation)?;
            if blocks.output {
                super::channel_blocks::into_blocks(tops)?;
            }
            return Ok(());
        }
        self.fold(bottoms[0], affine)?;
        self.forward_finished(bottoms, tops, activation, true, None)
    }

    fn folds_shortcut(&self) -> bool {
        true
    }

    /// The map folded as in
    /// [`forward_then_affine`](DynLayer::forward_then_affine), then the
    /// pass with the shortcut and the activation added as the bias is,
    /// where the path can (a 1x1 layer's product on the CPU), else after.
    fn forward_then_shortcut(
        &mut self,
        bottoms: &[&Blob<T>],
        top: &Blob<T>,
        shortcut: Shortcut<'_, T>,
        affine: Option<&ChannelAffine>,
        activation: Option<Activation>,
    ) -> Result<()> {
        let folded = match affine {
            None => false,
            Some(affine) if self.folds_map(affine, bottoms) => {
                self.fold(bottoms[0], affine)?;
                true
            }
            Some(affine) => {
                self.forward_then_affine(bottoms, &[top], affine, None)?;
                return crate::dyn_layer::add_shortcut_then(top, shortcut, activation);
            }
        };
        self.forward_finished(bottoms, &[top], activation, folded, Some(shortcut))
    }

    fn folds_concat(&self) -> bool {
        true
    }

    /// The map folded as in
    /// [`forward_then_affine`](DynLayer::forward_then_affine), then the
    /// host's pass over the batch, each image written into its run of
    /// `into` (the cores sharing the images as for the layer's own top),
    /// the activation applied as the bias is added: the same values as
    /// the layers apart.
    fn forward_into_channels(
        &mut self,
        bottoms: &[&Blob<T>],
        (into, first): (&Blob<T>, usize),
        affine: Option<&ChannelAffine>,
        activation: Option<Activation>,
    ) -> Result<bool> {
        let [x] = bottoms else { return Ok(false) };
        if x.data().device().is_some() || into.data().device().is_some() {
            return Ok(false);
        }
        let folded = match affine {
            None => false,
            Some(affine) if self.folds_map(affine, bottoms) => true,
            Some(_) => return Ok(false),
        };
        let Plan::Planar(g) = self.plan(x)?.plan.clone() else {
            return Ok(false);
        };
        if !ConvEngine::<T>::writes_at_stride(&g, self.p.group) {
            return Ok(false);
        }
        let per_image = g.channels_out * g.oh * g.ow;
        let (images, into_count) = (into.shape().first().copied().unwrap_or(0), into.count());
        if g.batch == 0 && images == 0 {
            return Ok(true);
        }
        let stride = into_count / images.max(1);
        if images != g.batch || first * g.oh * g.ow + per_image > stride {
            return Err(bad_param(
                "convolve into a Concat's top",
                format!(
                    "{} values of {} images from channel {first} do not fit a top of shape {}",
                    per_image,
                    g.batch,
                    into.shape_string()
                ),
            ));
        }
        if let Some(affine) = affine.filter(|_| folded) {
            self.fold(x, affine)?;
        }
        self.place_zero_bias(x)?;
        let (w, b) = if folded {
            (&self.folded.weights, &self.folded.bias)
        } else {
            weight_and_bias(&self.blobs, &self.zero_bias, self.p.bias_term)
        };
        let (xd, mut yd) = (x.cpu_data()?, into.mutable_cpu_data()?);
        let y = &mut yd[first * g.oh * g.ow..];
        let (group, choice) = (self.p.group, self.p.choice);
        self.engine
            .forward_into(&g, group, choice, (&xd, w, b), (y, stride), activation)?;
        Ok(true)
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        self.place_zero_bias(bottoms[0])?;
        for ((x, y), &down) in bottoms.iter().zip(tops).zip(propagate_down) {
            let plan = self.plan(x)?.plan.clone();
            let (w, b) = weight_and_bias(&self.blobs, &self.zero_bias, self.p.bias_term);
            match plan {
                Plan::Planar(g) => self.engine.backward_grouped(
                    &g,
                    self.p.group,
                    self.p.choice,
                    x,
                    w,
                    b,
                    y,
                    down,
                )?,
                Plan::Volume(g) => self.engine.backward_volume(&g, x, w, b, y, down)?,
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
