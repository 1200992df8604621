//! `Reorg` of the YOLOv2 Caffe forks (eric612/MobileNet-YOLO's
//! `reorg_layer`, after darknet's `reorg_cpu`): space to depth, in
//! darknet's own order, which is not ONNX's `SpaceToDepth`.
//!
//! Darknet reads the input, of `C x H x W`, as if it were
//! `C / s² x H·s x W·s`, and writes the output as the input's `C x H x W`
//! positions, then calls that `C·s² x H/s x W/s`: input position
//! `(c mod C/s², h·s + o div s, w·s + o mod s)`, `o = c div (C/s²)`, of the
//! reinterpreted shape goes to output position `(c, h, w)` of the
//! input's shape. With `reverse: true` the same pairs move the other
//! way, giving `C / s² x H·s x W·s`. Both are permutations, so the
//! backward pass moves each gradient back to where its value came from
//! (the fork's backward reads an internal blob it never fills, and so
//! gives zeros; training through it here gets the true gradient).

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::REORG;

/// The forks' `ReorgParameter`.
pub(crate) static REORG_PARAMETER: MessageSchema = MessageSchema {
    name: "ReorgParameter",
    fields: &[
        FieldSchema::optional("stride", 1, FieldKind::UInt32),
        FieldSchema::optional("reverse", 2, FieldKind::Bool)
            .with_default(FieldDefault::Bool(false)),
    ],
};

/// `reorg_param`. Each fork numbers it differently (148, 149, 155, 159);
/// 149 is the YOLOv3 forks' `upsample_param` here, so Intel Caffe's 159.
/// Prototxts name it, and a Reorg layer has no blobs for a `.caffemodel`
/// to carry.
pub(crate) const REORG_FIELD: FieldSchema =
    FieldSchema::optional("reorg_param", 159, FieldKind::Message(&REORG_PARAMETER));

/// `Reorg`: see the [module](self) documentation.
pub(crate) struct ReorgLayer {
    stride: usize,
    reverse: bool,
}

/// The input's `(items, channels, height, width)`.
type Dims = (usize, usize, usize, usize);

impl ReorgLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = crate::fork_layers::fork_param(layer, &REORG_FIELD, &REORG_PARAMETER);
        if !p.has("stride") || p.uint("stride") == 0 {
            return Err(bad_param(
                "set up Reorg",
                "reorg_param.stride must be given, and at least 1 (the fork requires it)",
            ));
        }
        Ok(Self {
            stride: p.uint("stride") as usize,
            reverse: p.boolean("reverse"),
        })
    }

    fn dims<T: MathElement>(&self, x: &Blob<T>) -> Result<Dims> {
        self.dims_of(x.shape())
    }

    /// The input's dims from its shape, checked: 4 axes, the channels a
    /// multiple of stride², and (unreversed) the height and width
    /// multiples of stride.
    pub(crate) fn dims_of(&self, s: &[usize]) -> Result<Dims> {
        let area = self.stride * self.stride;
        let problem = if s.len() != 4 {
            Some("it needs 4 axes (N C H W)".to_string())
        } else if !s[1].is_multiple_of(area) {
            Some(format!(
                "its {} channels are not a multiple of stride² = {area}",
                s[1]
            ))
        } else if !self.reverse
            && (!s[2].is_multiple_of(self.stride) || !s[3].is_multiple_of(self.stride))
        {
            Some(format!(
                "its {} x {} plane is not a multiple of stride {} on both axes",
                s[2], s[3], self.stride
            ))
        } else {
            None
        };
        match problem {
            Some(why) => Err(bad_param(
                "Reorg",
                format!(
                    "the input {} ({}): {why}",
                    s.iter().map(usize::to_string).collect::<Vec<_>>().join(" "),
                    s.iter().product::<usize>()
                ),
            )),
            None => Ok((s[0], s[1], s[2], s[3])),
        }
    }

    /// The move as Reshape, Transpose, Reshape (ONNX's and OpenCV's
    /// ops; batch 0, "as the input's"): the input viewed as 6 axes, their
    /// order, and the output's shape. Unreversed, the input is read as
    /// (c2, h, oy, w, ox) of `C/s², H, s, W, s` and written in the order
    /// (oy, ox, c2, h, w); reversed, the other way.
    pub(crate) fn as_reshapes(&self, (_, c, h, w): Dims) -> ([i64; 6], [usize; 6], [i64; 4]) {
        let s = self.stride;
        let groups = c / (s * s);
        let d = |v: usize| v as i64;
        if self.reverse {
            (
                [0, d(s), d(s), d(groups), d(h), d(w)],
                [0, 3, 4, 1, 5, 2],
                [0, d(groups), d(h * s), d(w * s)],
            )
        } else {
            (
                [0, d(groups), d(h), d(s), d(w), d(s)],
                [0, 3, 5, 1, 2, 4],
                [0, d(c * s * s), d(h / s), d(w / s)],
            )
        }
    }

    fn top_shape(&self, (n, c, h, w): Dims) -> Vec<usize> {
        let s = self.stride;
        if self.reverse {
            vec![n, c / (s * s), h * s, w * s]
        } else {
            vec![n, c * s * s, h / s, w / s]
        }
    }

    /// Calls `pair(p, q)` for each flat position `p` of the input's shape
    /// and the flat position `q` darknet pairs it with in the shape read
    /// as `C / s² x H·s x W·s`.
    fn pairs(&self, (n, c, h, w): Dims, mut pair: impl FnMut(usize, usize)) {
        let s = self.stride;
        let groups = c / (s * s);
        let mut p = 0;
        for item in 0..n {
            for ch in 0..c {
                let (c2, offset) = (ch % groups, ch / groups);
                for row in 0..h {
                    let row2 = row * s + offset / s;
                    let base = ((item * groups + c2) * h * s + row2) * w * s + offset % s;
                    for col in 0..w {
                        pair(p, base + col * s);
                        p += 1;
                    }
                }
            }
        }
    }

    /// Moves `from` into `to`: `to[p] = from[q]` where `gather`, else
    /// `to[q] = from[p]`.
    fn shuffle<T: Copy>(&self, dims: Dims, gather: bool, from: &[T], to: &mut [T]) {
        if gather {
            self.pairs(dims, |p, q| to[p] = from[q]);
        } else {
            self.pairs(dims, |p, q| to[q] = from[p]);
        }
    }

    /// The move on the GPU, as [`Self::shuffle`] on the CPU.
    #[cfg(feature = "cuda")]
    fn shuffle_on(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        dims: Dims,
        gather: bool,
        from: &blob_kernels::cuda::cudarc::driver::CudaView<'_, f32>,
        to: &mut blob_kernels::cuda::cudarc::driver::CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let (n, c, h, w) = dims;
        let count = n * c * h * w;
        // SAFETY: both views hold the n x c x h x w values the pairs
        // index (the dims were checked).
        unsafe {
            cuda::reorg_f32(
                gpu,
                blob_kernels::cuda::launch_config(count),
                count as i64,
                c as i64,
                h as i64,
                w as i64,
                self.stride as i64,
                i32::from(gather),
                from,
                to,
            )
        }
        .map_err(|e| crate::gpu::cuda("Reorg on the GPU", e))
    }
}

impl<T: MathElement> DynLayer<T> for ReorgLayer {
    fn type_name(&self) -> &str {
        "Reorg"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let dims = self.dims(bottoms[0])?;
        Ok(vec![TopShape::new(self.top_shape(dims))])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let dims = self.dims(bottoms[0])?;
        let gather = !self.reverse;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Reorg", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let n = bottoms[0].count();
            let (x, mut y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            return self.shuffle_on(&gpu, dims, gather, &read(&x, n)?, &mut write(&mut y, n)?);
        }
        let x = bottoms[0].cpu_data()?;
        self.shuffle(dims, gather, &x, &mut tops[0].mutable_cpu_data()?);
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
        let dims = self.dims(bottoms[0])?;
        // Each gradient goes back the way its value came.
        let gather = self.reverse;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Reorg", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let n = bottoms[0].count();
            let (dy, mut dx) = (
                as_f32(tops[0]).gpu_diff()?,
                as_f32(bottoms[0]).mutable_gpu_diff()?,
            );
            return self.shuffle_on(&gpu, dims, gather, &read(&dy, n)?, &mut write(&mut dx, n)?);
        }
        let dy = tops[0].cpu_diff()?;
        self.shuffle(dims, gather, &dy, &mut bottoms[0].mutable_cpu_diff()?);
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
