//! A convolution's passes on the device its blobs live on, with the
//! buffers they keep between calls: what the typed [`Convolution`](super::Convolution)
//! and the run-time [`ConvolutionLayer`](super::ConvolutionLayer) both run.

use blob_runtime::{Blob, MathElement};

use super::cpu::{self, ConvGeometry, ConvGradients, ConvScratch, Finish};
#[cfg(feature = "cuda")]
use super::cuda;
#[cfg(feature = "cudnn")]
use super::cudnn;
use super::packed_weights::PackedWeights;
use super::volume::{self, VolumeGeometry, VolumeScratch};
use super::winograd::{self, WinogradScratch};
use crate::Activation;
use crate::dyn_layer::Shortcut;
use crate::f32_view::{as_f32, as_f32_mut};
use crate::layer::Result;

/// Which algorithms a convolution may take beyond Caffe's im2col: on the
/// CPU Winograd for f32 3x3 layers, and its 8-point variants (5x5
/// layers, 3x3 ones in 6x6 tiles) where `winograd_wide` allows them; on
/// the GPU cuDNN, with or without TF32 (feature `cudnn`).
/// Caffe's `engine: CAFFE` keeps both sides on im2col, so that the
/// results are Caffe's own to the bit on the CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EngineChoice {
    pub winograd: bool,
    /// F(4x4, 5x5) and F(6x6, 3x3) round to 3e-6 to 8e-6 of the outputs'
    /// scale, ten times im2col's: in a TRAIN-phase net, where that
    /// shortened how long two runs of different summation orders track
    /// each other (LeNet on 2 cores and on 3: from past 200 iterations
    /// to 22), 5x5 layers keep im2col and 3x3 ones F(4x4, 3x3).
    pub winograd_wide: bool,
    #[cfg(feature = "cudnn")]
    pub use_cudnn: bool,
    #[cfg(feature = "cudnn")]
    pub allow_tf32: bool,
}

/// The buffers a convolution keeps between passes (grow-only).
#[derive(Default)]
pub(crate) struct ConvEngine<T: MathElement> {
    scratch: ConvScratch<T>,
    packed: PackedWeights,
    pub(super) blocks: super::channel_blocks::BlockScratch,
    winograd: WinogradScratch,
    volume: VolumeScratch<T>,
    #[cfg(feature = "cuda")]
    gpu_scratch: cuda::GpuScratch,
    #[cfg(feature = "cudnn")]
    cudnn: Option<cudnn::CudnnConv>,
}

impl<T: MathElement> ConvEngine<T> {
    /// A convolution over three or more spatial axes (Caffe's
    /// `im2col_nd`), on the device the blobs live on.
    pub fn forward_volume(
        &mut self,
        g: &VolumeGeometry,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)? {
            let blobs = cuda::ConvBlobs::of(x, weight, bias, y);
            let plane = cuda::flattened(g);
            return cuda::forward(
                (&plane, Some(g)),
                g.groups,
                &mut self.gpu_scratch,
                &gpu,
                blobs,
            );
        }
        volume::forward(
            g,
            &mut self.volume,
            &x.cpu_data()?,
            &weight.cpu_data()?,
            &bias.cpu_data()?,
            &mut y.mutable_cpu_data()?,
        )
    }

    /// [`backward`](Self::backward) over three or more spatial axes, on
    /// the device as [`forward_volume`](Self::forward_volume).
    pub fn backward_volume(
        &mut self,
        g: &VolumeGeometry,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)? {
            let blobs = cuda::ConvBlobs::of(x, weight, bias, y);
            let plane = cuda::flattened(g);
            let scratch = &mut self.gpu_scratch;
            return cuda::backward(
                (&plane, Some(g)),
                g.groups,
                scratch,
                &gpu,
                blobs,
                propagate_down,
            );
        }
        let scratch = &mut self.volume;
        on_host_backward(x, weight, bias, y, propagate_down, |x, w, dy, grads| {
            volume::backward(g, scratch, x, w, dy, grads)
        })
    }
}

/// The GPU a Deconvolution's blobs all live on, if any (an error if
/// they are spread over devices).
#[cfg(feature = "cuda")]
fn gpu_for_deconv<T: MathElement>(
    x: &Blob<T>,
    weight: &Blob<T>,
    bias: Option<&Blob<T>>,
    y: &Blob<T>,
) -> Result<Option<std::sync::Arc<blob_kernels::cuda::Gpu>>> {
    let mut others = vec![("output", y), ("weights", weight)];
    others.extend(bias.map(|b| ("bias", b)));
    crate::gpu::gpu_for("deconvolve", x, &others)
}

/// Hands a backward pass on the host its slices: `x`, the weights, `y`'s
/// diff, and the weight, bias and (when `propagate_down`) input
/// gradients to write.
fn on_host_backward<T: MathElement>(
    x: &Blob<T>,
    weight: &Blob<T>,
    bias: &Blob<T>,
    y: &Blob<T>,
    propagate_down: bool,
    pass: impl FnOnce(&[T], &[T], &[T], ConvGradients<'_, T>) -> Result<()>,
) -> Result<()> {
    let mut dx = if propagate_down {
        Some(x.mutable_cpu_diff()?)
    } else {
        None
    };
    pass(
        &x.cpu_data()?,
        &weight.cpu_data()?,
        &y.cpu_diff()?,
        ConvGradients {
            weight: Some(&mut weight.mutable_cpu_diff()?),
            bias: Some(&mut bias.mutable_cpu_diff()?),
            input: dx.as_deref_mut(),
        },
    )
}

impl<T: MathElement> ConvEngine<T> {
    /// [`forward`](Self::forward) with the channels cut into `groups`
    /// (Caffe's `group`: group `i` reads input channels `i C/G..(i+1)
    /// C/G` and writes outputs `i M/G..`). On a GPU, one gemm per group
    /// (cuDNN takes ungrouped convolutions, a kernel of its own depthwise
    /// ones); on the CPU, f32 3x3 and 5x5 layers at stride 1 take
    /// Winograd where it pays and `choice` allows it, grouped ones
    /// (CaffeNet's conv4 and conv5) a group after another.
    ///
    /// With an `activation`, it follows in place, in the pass that adds
    /// the bias where the path has one (a net's Convolution with the
    /// in-place activation after it folded in); with a `shortcut`, that
    /// is added before it (an Eltwise SUM folded in).
    pub fn forward_grouped(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        choice: EngineChoice,
        (x, weight, bias, y): (&Blob<T>, &Blob<T>, &Blob<T>, &Blob<T>),
        (activation, shortcut): (Option<Activation>, Option<Shortcut<'_, T>>),
    ) -> Result<()> {
        if let Some(shortcut) = shortcut {
            let blobs = (x, weight, bias, y);
            if !self.forward_pointwise_shortcut(g, groups, blobs, activation, shortcut)? {
                self.forward_paths(g, groups, choice, blobs, None)?;
                crate::dyn_layer::add_shortcut_then(y, shortcut, activation)?;
            }
            return Ok(());
        }
        let folded = self.forward_paths(g, groups, choice, (x, weight, bias, y), activation)?;
        if let Some(activation) = activation
            && !folded
        {
            activation.run_in_place(y)?;
        }
        Ok(())
    }

    /// A 1x1 layer's forward pass on the CPU with the shortcut and the
    /// activation added as its product stores each value, where
    /// [`forward_paths`](Self::forward_paths) would run that product
    /// (f32, one group, weights not packed): ResNet-50's residual adds,
    /// a pass over 3.4 ms of its 65 on an Intel core (AVX-512, one
    /// thread), go into its 1x1 layers' stores. Says whether it ran.
    fn forward_pointwise_shortcut(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        (x, weight, bias, y): (&Blob<T>, &Blob<T>, &Blob<T>, &Blob<T>),
        activation: Option<Activation>,
        shortcut: Shortcut<'_, T>,
    ) -> Result<bool> {
        #[cfg(feature = "cuda")]
        if crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)?.is_some() {
            return Ok(false);
        }
        if groups != 1 || !g.is_pointwise() || g.takes_packed_weights::<T>() {
            return Ok(false);
        }
        let (xd, w, b) = (x.cpu_data()?, weight.cpu_data()?, bias.cpu_data()?);
        let added = shortcut.blob.cpu_data()?;
        let finish = Finish {
            bias: &b,
            activation,
        };
        let mut yd = y.mutable_cpu_data()?;
        Ok(cpu::forward_pointwise_shortcut(
            g,
            (&xd, &w),
            finish,
            (&added, shortcut.first),
            &mut yd,
        ))
    }

    /// [`forward_grouped`](Self::forward_grouped)'s paths; says whether
    /// the path applied the `activation` itself.
    fn forward_paths(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        choice: EngineChoice,
        (x, weight, bias, y): (&Blob<T>, &Blob<T>, &Blob<T>, &Blob<T>),
        activation: Option<Activation>,
    ) -> Result<bool> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)? {
            let blobs = cuda::ConvBlobs::of(x, weight, bias, y);
            #[cfg(feature = "cudnn")]
            if groups == 1
                && let Some(dnn) =
                    cudnn::CudnnConv::for_layer(&mut self.cudnn, choice.use_cudnn, &gpu)?
            {
                return dnn
                    .forward(&gpu, g, choice.allow_tf32, blobs)
                    .map(|()| false);
            }
            if g.is_depthwise(groups) {
                return cuda::depthwise_forward(g, &gpu, blobs).map(|()| false);
            }
            return cuda::forward((g, None), groups, &mut self.gpu_scratch, &gpu, blobs)
                .map(|()| false);
        }
        let (x, y) = (x.cpu_data()?, &mut y.mutable_cpu_data()?);
        let per_image = g.channels_out * g.oh * g.ow;
        self.forward_into(
            g,
            groups,
            choice,
            (&x, weight, bias),
            (y, per_image),
            activation,
        )?;
        Ok(true)
    }

    /// Whether [`forward_into`](Self::forward_into) writes `g`'s images
    /// at a stride of more than their own size with the values of the
    /// pass that writes them packed: all but a window over the whole
    /// input of several images, whose images are the rows of one product
    /// (one image at a time would be other products: a gemv's sums).
    pub fn writes_at_stride(g: &ConvGeometry, groups: usize) -> bool {
        groups != 1 || g.writes_at_stride()
    }

    /// [`forward_grouped`](Self::forward_grouped) on the host with no
    /// shortcut, the `activation` applied as each value is stored: `x`
    /// laid out as the layer's bottom of `g.batch` images, image `n`'s
    /// output written to `y[n * stride..]`.
    /// [`forward_paths`](Self::forward_paths) runs it on a layer's top
    /// (`stride` one image's output); a net that folds a Concat into the
    /// layers before it on the Concat's top from the layer's first
    /// channel (`stride` one image of that top), where
    /// [`writes_at_stride`](Self::writes_at_stride).
    pub fn forward_into(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        choice: EngineChoice,
        (x, weight, bias): (&[T], &Blob<T>, &Blob<T>),
        (y, stride): (&mut [T], usize),
        activation: Option<Activation>,
    ) -> Result<()> {
        let group = ConvGeometry {
            channels_in: g.channels_in / groups.max(1),
            channels_out: g.channels_out / groups.max(1),
            ..*g
        };
        let tile = choice
            .winograd
            .then(|| group.winograd_tile::<T>(choice.winograd_wide))
            .flatten();
        if let Some(tile) = tile {
            let stamp = weight.data().write_stamp();
            let (w, b) = (weight.cpu_data()?, bias.cpu_data()?);
            // `winograd_tile` takes f32 alone.
            if let (Some(x), Some(w), Some(b), Some(y)) =
                (as_f32(x), as_f32(&w), as_f32(&b), as_f32_mut(&mut *y))
            {
                let finish = Finish {
                    bias: b,
                    activation,
                };
                return winograd::forward(
                    &group,
                    tile,
                    groups,
                    &mut self.winograd,
                    stamp,
                    x,
                    w,
                    finish,
                    (y, stride),
                );
            }
        }
        if groups == 1 {
            let w = weight.cpu_data()?;
            let packed = self.packed.for_layer(g, weight.data().write_stamp(), &w)?;
            let bias = bias.cpu_data()?;
            let finish = Finish {
                bias: &bias,
                activation,
            };
            return cpu::forward(g, &mut self.scratch, x, (&w, packed), finish, (y, stride));
        }
        let per_image = g.channels_out * g.oh * g.ow;
        if stride != per_image && g.batch > 1 {
            // The grouped and depthwise passes take each image (and
            // group) on its own: one image at a time, the same sums.
            let image = ConvGeometry { batch: 1, ..*g };
            let per_input = g.channels_in * g.h * g.w;
            for n in 0..g.batch {
                let (x, y) = (&x[n * per_input..][..per_input], &mut y[n * stride..]);
                self.forward_into(
                    &image,
                    groups,
                    choice,
                    (x, weight, bias),
                    (y, per_image),
                    activation,
                )?;
            }
            return Ok(());
        }
        if g.is_depthwise(groups) {
            let bias = bias.cpu_data()?;
            super::depthwise::forward(
                g,
                x,
                &weight.cpu_data()?,
                Finish {
                    bias: &bias,
                    activation,
                },
                y,
            );
            return Ok(());
        }
        let (sub, ..) = per_group(g, groups);
        let (wd, bd) = (weight.cpu_data()?, bias.cpu_data()?);
        cpu::forward_groups(
            &sub,
            groups,
            g.batch,
            &mut self.scratch,
            x,
            &wd,
            Finish {
                bias: &bd,
                activation,
            },
            y,
        )
    }

    /// [`backward`](Self::backward) with the channels cut into `groups`,
    /// on the GPU as [`forward_grouped`](Self::forward_grouped).
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(not(feature = "cudnn"), allow(unused_variables))]
    pub fn backward_grouped(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        choice: EngineChoice,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: &Blob<T>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for_learned("convolve", x, y, weight, bias)? {
            let blobs = cuda::ConvBlobs::of(x, weight, bias, y);
            #[cfg(feature = "cudnn")]
            if groups == 1
                && let Some(dnn) =
                    cudnn::CudnnConv::for_layer(&mut self.cudnn, choice.use_cudnn, &gpu)?
            {
                return dnn.backward(&gpu, g, choice.allow_tf32, blobs, propagate_down);
            }
            if g.is_depthwise(groups) {
                return cuda::depthwise_backward(g, &gpu, blobs, propagate_down);
            }
            return cuda::backward(
                (g, None),
                groups,
                &mut self.gpu_scratch,
                &gpu,
                blobs,
                propagate_down,
            );
        }
        if groups == 1 {
            let scratch = &mut self.scratch;
            return on_host_backward(x, weight, bias, y, propagate_down, |x, w, dy, grads| {
                cpu::backward(g, scratch, x, w, dy, grads)
            });
        }
        if g.is_depthwise(groups) {
            return on_host_backward(x, weight, bias, y, propagate_down, |x, w, dy, grads| {
                super::depthwise_gradient::backward(g, x, w, dy, grads);
                Ok(())
            });
        }
        let (sub, xs, ys, ws) = per_group(g, groups);
        let (xd, wd, dy) = (x.cpu_data()?, weight.cpu_data()?, y.cpu_diff()?);
        let (mut dw, mut db) = (weight.mutable_cpu_diff()?, bias.mutable_cpu_diff()?);
        let mut dx = if propagate_down {
            Some(x.mutable_cpu_diff()?)
        } else {
            None
        };
        let mg = sub.channels_out;
        for n in 0..g.batch {
            for gi in 0..groups {
                let (xo, yo) = ((n * groups + gi) * xs, (n * groups + gi) * ys);
                cpu::backward(
                    &sub,
                    &mut self.scratch,
                    &xd[xo..xo + xs],
                    &wd[gi * ws..(gi + 1) * ws],
                    &dy[yo..yo + ys],
                    ConvGradients {
                        weight: Some(&mut dw[gi * ws..(gi + 1) * ws]),
                        bias: Some(&mut db[gi * mg..(gi + 1) * mg]),
                        input: dx.as_deref_mut().map(|d| &mut d[xo..xo + xs]),
                    },
                )?;
            }
        }
        Ok(())
    }
}

impl<T: MathElement> ConvEngine<T> {
    /// Caffe's Deconvolution forward (on the GPU where the blobs live
    /// there): the convolution `g` (whose input is the deconvolution's
    /// output `y`, whose output is its input `x`) run backward to its
    /// input, then the bias per output channel.
    pub fn deconv_forward(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: Option<&Blob<T>>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu_for_deconv(x, weight, bias, y)? {
            use crate::gpu::as_f32;
            let blobs = (as_f32(x), as_f32(weight), bias.map(as_f32), as_f32(y));
            return cuda::deconv_forward((g, None), groups, &mut self.gpu_scratch, &gpu, blobs);
        }
        let (xd, wd) = (x.cpu_data()?, weight.cpu_data()?);
        let mut yd = y.mutable_cpu_data()?;
        if super::deconv_pointwise::suits(g, groups) {
            super::deconv_pointwise::forward(g, groups, &xd, &wd, &mut yd);
            return add_channel_bias(bias, &mut yd, g.h * g.w, g.channels_in);
        }
        let (sub, ys, xs, ws) = per_group(g, groups);
        for n in 0..g.batch {
            for gi in 0..groups {
                let (xo, yo) = ((n * groups + gi) * xs, (n * groups + gi) * ys);
                cpu::backward(
                    &sub,
                    &mut self.scratch,
                    &[],
                    &wd[gi * ws..(gi + 1) * ws],
                    &xd[xo..xo + xs],
                    ConvGradients {
                        weight: None,
                        bias: None,
                        input: Some(&mut yd[yo..yo + ys]),
                    },
                )?;
            }
        }
        add_channel_bias(bias, &mut yd, g.h * g.w, g.channels_in)
    }

    /// Caffe's Deconvolution backward (on the GPU where the blobs live
    /// there): the weight gradient (the convolution's, from `y`'s diff as
    /// its input and `x` as its output's gradient), the bias gradient,
    /// and `x`'s diff (the convolution of `y`'s diff) when
    /// `propagate_down`.
    #[allow(clippy::too_many_arguments)]
    pub fn deconv_backward(
        &mut self,
        g: &ConvGeometry,
        groups: usize,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: Option<&Blob<T>>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu_for_deconv(x, weight, bias, y)? {
            use crate::gpu::as_f32;
            let blobs = (as_f32(x), as_f32(weight), bias.map(as_f32), as_f32(y));
            return cuda::deconv_backward(
                (g, None),
                groups,
                &mut self.gpu_scratch,
                &gpu,
                blobs,
                propagate_down,
            );
        }
        let (sub, ys, xs, ws) = per_group(g, groups);
        let (xd, wd, dy) = (x.cpu_data()?, weight.cpu_data()?, y.cpu_diff()?);
        let mut dw = weight.mutable_cpu_diff()?;
        let mut dx = if propagate_down {
            Some(x.mutable_cpu_diff()?)
        } else {
            None
        };
        let no_bias = vec![T::ZERO; sub.channels_out];
        for n in 0..g.batch {
            for gi in 0..groups {
                let (xo, yo) = ((n * groups + gi) * xs, (n * groups + gi) * ys);
                let top = &dy[yo..yo + ys];
                cpu::backward(
                    &sub,
                    &mut self.scratch,
                    top,
                    &wd[gi * ws..(gi + 1) * ws],
                    &xd[xo..xo + xs],
                    ConvGradients {
                        weight: Some(&mut dw[gi * ws..(gi + 1) * ws]),
                        bias: None,
                        input: None,
                    },
                )?;
                if let Some(dx) = dx.as_deref_mut() {
                    let w = &wd[gi * ws..(gi + 1) * ws];
                    cpu::forward(
                        &sub,
                        &mut self.scratch,
                        top,
                        (w, None),
                        Finish {
                            bias: &no_bias,
                            activation: None,
                        },
                        (&mut dx[xo..xo + xs], xs),
                    )?;
                }
            }
        }
        add_channel_sums(bias, &dy, g.h * g.w, g.channels_in)
    }

    /// [`deconv_forward`](Self::deconv_forward) over three or more
    /// spatial axes: `g` is the convolution transposed.
    pub fn deconv_forward_volume(
        &mut self,
        g: &VolumeGeometry,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: Option<&Blob<T>>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu_for_deconv(x, weight, bias, y)? {
            use crate::gpu::as_f32;
            let blobs = (as_f32(x), as_f32(weight), bias.map(as_f32), as_f32(y));
            let plane = cuda::flattened(g);
            let scratch = &mut self.gpu_scratch;
            return cuda::deconv_forward((&plane, Some(g)), g.groups, scratch, &gpu, blobs);
        }
        let mut yd = y.mutable_cpu_data()?;
        volume::backward(
            g,
            &mut self.volume,
            &[],
            &weight.cpu_data()?,
            &x.cpu_data()?,
            ConvGradients {
                weight: None,
                bias: None,
                input: Some(&mut yd),
            },
        )?;
        add_channel_bias(bias, &mut yd, g.input.iter().product(), g.channels_in)
    }

    /// [`deconv_backward`](Self::deconv_backward) over three or more
    /// spatial axes.
    pub fn deconv_backward_volume(
        &mut self,
        g: &VolumeGeometry,
        x: &Blob<T>,
        weight: &Blob<T>,
        bias: Option<&Blob<T>>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = gpu_for_deconv(x, weight, bias, y)? {
            use crate::gpu::as_f32;
            let blobs = (as_f32(x), as_f32(weight), bias.map(as_f32), as_f32(y));
            let plane = cuda::flattened(g);
            let scratch = &mut self.gpu_scratch;
            return cuda::deconv_backward(
                (&plane, Some(g)),
                g.groups,
                scratch,
                &gpu,
                blobs,
                propagate_down,
            );
        }
        let (xd, wd, dy) = (x.cpu_data()?, weight.cpu_data()?, y.cpu_diff()?);
        let grads = ConvGradients {
            weight: Some(&mut weight.mutable_cpu_diff()?),
            bias: None,
            input: None,
        };
        volume::backward(g, &mut self.volume, &dy, &wd, &xd, grads)?;
        if propagate_down {
            let no_bias = vec![T::ZERO; g.channels_out];
            let mut dx = x.mutable_cpu_diff()?;
            volume::forward(g, &mut self.volume, &dy, &wd, &no_bias, &mut dx)?;
        }
        add_channel_sums(bias, &dy, g.input.iter().product(), g.channels_in)
    }
}

/// `y += bias[c]` over each plane of `plane` values of `channels`
/// channels, where there is a bias.
fn add_channel_bias<T: MathElement>(
    bias: Option<&Blob<T>>,
    y: &mut [T],
    plane: usize,
    channels: usize,
) -> Result<()> {
    if let Some(bias) = bias {
        let bd = bias.cpu_data()?;
        for (i, row) in y.chunks_mut(plane.max(1)).enumerate() {
            let b = bd[i % channels];
            row.iter_mut().for_each(|v| *v += b);
        }
    }
    Ok(())
}

/// The bias gradient: each channel's plane sums of `dy` added, where
/// there is a bias.
fn add_channel_sums<T: MathElement>(
    bias: Option<&Blob<T>>,
    dy: &[T],
    plane: usize,
    channels: usize,
) -> Result<()> {
    if let Some(bias) = bias {
        let mut db = bias.mutable_cpu_diff()?;
        for (i, row) in dy.chunks(plane.max(1)).enumerate() {
            db[i % channels] += blob_kernels::cpu::sum(row);
        }
    }
    Ok(())
}

/// One group of one image: its geometry, and the input, output and
/// weight values per group.
fn per_group(g: &ConvGeometry, groups: usize) -> (ConvGeometry, usize, usize, usize) {
    let sub = ConvGeometry {
        batch: 1,
        channels_in: g.channels_in / groups,
        channels_out: g.channels_out / groups,
        ..*g
    };
    let xs = sub.channels_in * g.h * g.w;
    let ys = sub.channels_out * g.oh * g.ow;
    let ws = sub.channels_out * sub.patch();
    (sub, xs, ys, ws)
}
