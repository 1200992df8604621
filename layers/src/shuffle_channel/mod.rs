//! `ShuffleChannel` of ShuffleNet's Caffe forks (farmingyard/ShuffleNet):
//! the channels, seen as a `group` x `C / group` matrix, transposed.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::SHUFFLE_CHANNEL;

/// The fork's `ShuffleChannelParameter`.
pub(crate) static SHUFFLE_CHANNEL_PARAMETER: MessageSchema = MessageSchema {
    name: "ShuffleChannelParameter",
    fields: &[
        FieldSchema::optional("group", 1, FieldKind::UInt32).with_default(FieldDefault::Int(1))
    ],
};

/// `shuffle_channel_param`, field 164 as in the forks.
pub(crate) const SHUFFLE_CHANNEL_FIELD: FieldSchema = FieldSchema::optional(
    "shuffle_channel_param",
    164,
    FieldKind::Message(&SHUFFLE_CHANNEL_PARAMETER),
);

/// Output channel `j * group + i` is input channel `i * (C / group) + j`.
pub(crate) struct ShuffleChannelLayer {
    group: usize,
}

impl ShuffleChannelLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(
            layer,
            &SHUFFLE_CHANNEL_FIELD,
            &SHUFFLE_CHANNEL_PARAMETER,
        );
        let group = p.uint("group") as usize;
        if group == 0 {
            return Err(bad_param(
                "set up ShuffleChannel",
                "shuffle_channel_param.group must be at least 1",
            ));
        }
        Ok(Self { group })
    }

    /// `(items, channels, plane)`.
    fn dims<T: MathElement>(&self, x: &Blob<T>) -> Result<(usize, usize, usize)> {
        let s = x.shape();
        if s.len() < 2 || !s[1].is_multiple_of(self.group) {
            return Err(bad_param(
                "ShuffleChannel",
                format!(
                    "the input {} has no channel count divisible by group {}",
                    x.shape_string(),
                    self.group
                ),
            ));
        }
        Ok((s[0], s[1], s[2..].iter().product()))
    }

    /// The planes moved on the GPU: forward from `from`'s data into
    /// `to`'s, or (`back`) the gradients from `from`'s diff into `to`'s.
    #[cfg(feature = "cuda")]
    fn move_on<T: MathElement>(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        back: bool,
        channels: usize,
        plane: usize,
        from: &Blob<T>,
        to: &Blob<T>,
    ) -> Result<()> {
        use crate::gpu::{as_f32, read, write};
        let (from, to) = (as_f32(from), as_f32(to));
        let n = from.count();
        let args = (n as i64, channels as i64, self.group as i64, plane as i64);
        let launch = blob_kernels::cuda::launch_config(n);
        let done = if back {
            let (dy, mut dx) = (from.gpu_diff()?, to.mutable_gpu_diff()?);
            // SAFETY: both blobs hold n values of (items, channels, plane).
            unsafe {
                cuda::unshuffle_channel_f32(
                    gpu,
                    launch,
                    args.0,
                    args.1,
                    args.2,
                    args.3,
                    &read(&dy, n)?,
                    &mut write(&mut dx, n)?,
                )
            }
        } else {
            let (x, mut y) = (from.gpu_data()?, to.mutable_gpu_data()?);
            // SAFETY: as above.
            unsafe {
                cuda::shuffle_channel_f32(
                    gpu,
                    launch,
                    args.0,
                    args.1,
                    args.2,
                    args.3,
                    &read(&x, n)?,
                    &mut write(&mut y, n)?,
                )
            }
        };
        done.map_err(|e| crate::gpu::cuda("ShuffleChannel on the GPU", e))
    }

    /// Input channel of each output channel.
    fn sources(&self, channels: usize) -> impl Iterator<Item = usize> + '_ {
        let per_group = channels / self.group;
        (0..channels).map(move |out| (out % self.group) * per_group + out / self.group)
    }
}

impl<T: MathElement> DynLayer<T> for ShuffleChannelLayer {
    fn type_name(&self) -> &str {
        "ShuffleChannel"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.dims(bottoms[0])?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (_, c, plane) = self.dims(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for("ShuffleChannel", bottoms[0], &[("output", tops[0])])?
        {
            return self.move_on(&gpu, false, c, plane, bottoms[0], tops[0]);
        }
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        for (src, dst) in x.chunks(c * plane).zip(y.chunks_mut(c * plane)) {
            for (out, from) in self.sources(c).enumerate() {
                dst[out * plane..(out + 1) * plane]
                    .copy_from_slice(&src[from * plane..(from + 1) * plane]);
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let (_, c, plane) = self.dims(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) =
            crate::gpu::gpu_for("ShuffleChannel", bottoms[0], &[("output", tops[0])])?
        {
            return self.move_on(&gpu, true, c, plane, tops[0], bottoms[0]);
        }
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        for (grad, out_grad) in dx.chunks_mut(c * plane).zip(dy.chunks(c * plane)) {
            for (out, from) in self.sources(c).enumerate() {
                grad[from * plane..(from + 1) * plane]
                    .copy_from_slice(&out_grad[out * plane..(out + 1) * plane]);
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
