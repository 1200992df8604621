//! Caffe's `SPP` (spatial pyramid pooling): the input pooled into 1, 4,
//! 16, ... bins, each level flattened and all concatenated, so any input
//! size gives one fixed-length vector (SPP-net).

use blob_proto::{ParamMessage, ParamValue, schema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;
use crate::pool::PoolingLayer;

/// One pyramid level: its pooling layer (remade when the input's size
/// changes) and its output.
struct Level {
    pool: PoolingLayer,
    out: Blob<f64>,
}

/// Caffe `SPP`: `pyramid_height` levels; level `l` pools with a window
/// of `ceil(size / 2^l)`, the same stride and the padding Caffe's
/// `GetPoolingParam` gives, so its `2^l x 2^l` bins cover the input.
/// One level gives the pooling's (N, C, 1, 1); more give (N, C * sum 4^l).
pub(crate) struct SppLayer {
    height: usize,
    pool: &'static str,
    /// The input size the levels were made for.
    made_for: Option<[usize; 2]>,
    levels: Vec<Level>,
    /// On a GPU: each level's output, and the input's data with a
    /// gradient of its own that each level's backward pass writes.
    #[cfg(feature = "cuda")]
    device: DeviceLevels,
}

/// The GPU side's blobs, on the input's device.
#[cfg(feature = "cuda")]
#[derive(Default)]
struct DeviceLevels {
    outs: Vec<Blob<f32>>,
    input: Blob<f32>,
}

impl SppLayer {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "spp_param");
        let height = p.uint("pyramid_height") as usize;
        if !(1..=16).contains(&height) {
            return Err(bad_param(
                "set up SPP",
                format!("spp_param.pyramid_height must be 1 to 16, not {height}"),
            ));
        }
        let pool = p.enum_name("pool");
        if pool == "STOCHASTIC" {
            return Err(bad_param(
                "set up SPP",
                "STOCHASTIC pooling is not supported (MAX or AVE)",
            ));
        }
        Ok(Self {
            height,
            pool,
            made_for: None,
            levels: Vec::new(),
            #[cfg(feature = "cuda")]
            device: DeviceLevels::default(),
        })
    }

    /// Caffe's `GetPoolingParam` for level `level` over an `h` x `w` input.
    fn level_param(&self, level: usize, [h, w]: [usize; 2]) -> ParamMessage {
        let bins = 1usize << level;
        let mut layer = ParamMessage::new(&schema::LAYER_PARAMETER);
        let p = layer.message_mut("pooling_param");
        p.set(
            "pool",
            ParamValue::Enum(schema::POOL_METHOD.value(self.pool).unwrap_or(0)),
        );
        for (size, axis) in [(h, "h"), (w, "w")] {
            let kernel = size.div_ceil(bins);
            let pad = (kernel * bins - size).div_ceil(2);
            p.set(&format!("kernel_{axis}"), ParamValue::UInt(kernel as u64));
            p.set(&format!("stride_{axis}"), ParamValue::UInt(kernel as u64));
            p.set(&format!("pad_{axis}"), ParamValue::UInt(pad as u64));
        }
        layer
    }

    fn dims<T: MathElement>(x: &Blob<T>) -> Result<[usize; 4]> {
        match *x.shape() {
            [n, c, h, w] if h > 0 && w > 0 => Ok([n, c, h, w]),
            _ => Err(bad_param(
                "SPP",
                format!("the input is {}, not (N, C, H, W)", x.shape_string()),
            )),
        }
    }

    /// The levels for this input, made again where its size changed.
    fn levels_for<T: MathElement>(&mut self, x: &Blob<T>) -> Result<()> {
        let [_, _, h, w] = Self::dims(x)?;
        if self.made_for == Some([h, w]) {
            return Ok(());
        }
        self.levels = (0..self.height)
            .map(|l| {
                Ok(Level {
                    pool: PoolingLayer::from_param(&self.level_param(l, [h, w]))?,
                    out: Blob::default(),
                })
            })
            .collect::<Result<_>>()?;
        self.made_for = Some([h, w]);
        Ok(())
    }
}

/// The GPU side: the levels pooled on the device in `f32` (Caffe's own
/// SPP is a net of Pooling, Flatten and Concat layers), each level's
/// rows moved into place as Concat moves a part.
/// Where a level's `len` values of each of the `n` items lie in the
/// top's rows of `row` values: from `offset` on, as Concat places a part.
#[cfg(feature = "cuda")]
fn level_rows(n: usize, row: usize, offset: usize, len: usize) -> crate::concat::Slabs {
    crate::concat::Slabs {
        outer: n,
        inner: 1,
        total: row,
        offset,
        len,
    }
}

#[cfg(feature = "cuda")]
impl SppLayer {
    /// Each level's part of an item's row: `(offset, length)`.
    fn parts(&self, n: usize) -> Vec<(usize, usize)> {
        let mut offset = 0;
        self.device
            .outs
            .iter()
            .map(|out| {
                let per = out.count() / n.max(1);
                offset += per;
                (offset - per, per)
            })
            .collect()
    }

    fn forward_on(
        &mut self,
        gpu: &blob_kernels::cuda::Gpu,
        n: usize,
        x: &Blob<f32>,
        y: &Blob<f32>,
    ) -> Result<()> {
        use crate::gpu::{read, write};
        let outs = &mut self.device.outs;
        outs.resize_with(self.levels.len(), Blob::default);
        for (level, out) in self.levels.iter_mut().zip(outs.iter_mut()) {
            let shapes = DynLayer::<f32>::reshape(&mut level.pool, &[x], &[&*out])?;
            crate::softmax::place_with(out, x, &shapes[0].dims)?;
            DynLayer::<f32>::forward(&mut level.pool, &[x], &[&*out])?;
        }
        let row = y.count() / n.max(1);
        for ((offset, len), out) in self.parts(n).into_iter().zip(&self.device.outs) {
            let slabs = level_rows(n, row, offset, len);
            let (part, mut joined) = (out.gpu_data()?, y.mutable_gpu_data()?);
            let part = read(&part, out.count())?;
            slabs.join_on(gpu, &part, &mut write(&mut joined, y.count())?)?;
        }
        Ok(())
    }

    fn backward_on(
        &mut self,
        gpu: &blob_kernels::cuda::Gpu,
        n: usize,
        y: &Blob<f32>,
        x: &Blob<f32>,
    ) -> Result<()> {
        use crate::gpu::{cuda, read, write};
        const OP: &str = "SPP on the GPU";
        let input = &mut self.device.input;
        crate::softmax::place_with(input, x, x.shape())?;
        input.share_data(x)?;
        {
            let mut dx = x.mutable_gpu_diff()?;
            gpu.set(0.0, &mut write(&mut dx, x.count())?)
                .map_err(|e| cuda(OP, e))?;
        }
        let row = y.count() / n.max(1);
        let parts = self.parts(n);
        for ((level, out), (offset, len)) in
            self.levels.iter_mut().zip(&self.device.outs).zip(parts)
        {
            let slabs = level_rows(n, row, offset, len);
            {
                let (joined, mut part) = (y.gpu_diff()?, out.mutable_gpu_diff()?);
                let joined = read(&joined, y.count())?;
                slabs.split_on(gpu, &joined, &mut write(&mut part, out.count())?)?;
            }
            let input = &self.device.input;
            DynLayer::<f32>::backward(&mut level.pool, &[out], &[true], &[input])?;
            let (g, mut dx) = (input.gpu_diff()?, x.mutable_gpu_diff()?);
            gpu.axpy(1.0, &read(&g, x.count())?, &mut write(&mut dx, x.count())?)
                .map_err(|e| cuda(OP, e))?;
        }
        Ok(())
    }
}

/// The input in `f64`, for the levels' pooling.
fn widened<T: MathElement>(x: &Blob<T>) -> Result<Blob<f64>> {
    Blob::from_vec(
        x.shape(),
        x.cpu_data()?.iter().map(|v| v.to_f64()).collect(),
    )
}

impl<T: MathElement> DynLayer<T> for SppLayer {
    fn type_name(&self) -> &str {
        "SPP"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let [n, c, _, _] = Self::dims(bottoms[0])?;
        self.levels_for(bottoms[0])?;
        if self.height == 1 {
            return Ok(vec![TopShape::new(vec![n, c, 1, 1])]);
        }
        let bins: usize = (0..self.height).map(|l| 1usize << (2 * l)).sum();
        Ok(vec![TopShape::new(vec![n, c * bins])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let [n, _, _, _] = Self::dims(bottoms[0])?;
        self.levels_for(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("SPP", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::as_f32;
            return self.forward_on(&gpu, n, as_f32(bottoms[0]), as_f32(tops[0]));
        }
        let x = widened(bottoms[0])?;
        for level in &mut self.levels {
            let shapes = DynLayer::<f64>::reshape(&mut level.pool, &[&x], &[&level.out])?;
            level.out.reshape(&shapes[0].dims)?;
            DynLayer::<f64>::forward(&mut level.pool, &[&x], &[&level.out])?;
        }
        // Each item's row: level 0's values, then level 1's, ...
        let mut y = tops[0].mutable_cpu_data()?;
        let mut at = 0;
        for item in 0..n {
            for level in &self.levels {
                let per = level.out.count() / n.max(1);
                for &v in &level.out.cpu_data()?[item * per..(item + 1) * per] {
                    y[at] = T::from_f64(v);
                    at += 1;
                }
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
        let [n, _, _, _] = Self::dims(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("SPP", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::as_f32;
            return self.backward_on(&gpu, n, as_f32(tops[0]), as_f32(bottoms[0]));
        }
        let x = widened(bottoms[0])?;
        let dy = tops[0].cpu_diff()?;
        let mut total = vec![0.0f64; x.count()];
        let mut offset = 0;
        let row: usize = self.levels.iter().map(|l| l.out.count() / n.max(1)).sum();
        for level in &mut self.levels {
            let per = level.out.count() / n.max(1);
            {
                let mut d = level.out.mutable_cpu_diff()?;
                for item in 0..n {
                    for (j, g) in d[item * per..(item + 1) * per].iter_mut().enumerate() {
                        *g = dy[item * row + offset + j].to_f64();
                    }
                }
            }
            offset += per;
            DynLayer::<f64>::backward(&mut level.pool, &[&level.out], &[true], &[&x])?;
            for (t, &g) in total.iter_mut().zip(x.cpu_diff()?.iter()) {
                *t += g;
            }
        }
        for (d, t) in bottoms[0].mutable_cpu_diff()?.iter_mut().zip(total) {
            *d = T::from_f64(t);
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
