//! Caffe's Pooling as a run-time layer: `pooling_param` read when the
//! net is built, the output size recomputed from every input.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::{PoolEngine, PoolGeometry, PoolMethod};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up Pooling";

/// The window (height, width), or the whole plane for `global_pooling`.
#[derive(Clone, Copy, Debug)]
enum Window {
    Sized {
        kernel: [usize; 2],
        stride: [usize; 2],
        pad: [usize; 2],
    },
    Global,
}

/// Caffe `Pooling`, MAX or AVE, rectangular windows with padding, ceil or
/// floor rounding, or global. MAX takes a second top, Caffe's mask: where
/// in its plane each output's maximum was (`h * W + w`, -1 for an empty
/// window), as SegNet's and ENet's unpooling Upsample layers read it.
pub(crate) struct PoolingLayer {
    method: PoolMethod,
    window: Window,
    floor: bool,
    /// ChenYingpeng/caffe-yolov3's sizes ([`Fork::CaffeYolov3`]).
    ///
    /// [`Fork::CaffeYolov3`]: crate::Fork::CaffeYolov3
    darknet_sizes: bool,
    engine: PoolEngine,
}

/// A (height, width) size from `name` or its `_h`/`_w` pair (Caffe: one
/// or the other; the pair both or neither).
fn pair(p: &ParamMessage, name: &str, h: &str, w: &str) -> Result<Option<[usize; 2]>> {
    let size = |f: &str| {
        usize::try_from(p.uint(f))
            .map_err(|_| bad_param(OP, format!("{f} {} is too large", p.uint(f))))
    };
    match (p.has(name), p.has(h), p.has(w)) {
        (false, false, false) => Ok(None),
        (true, false, false) => Ok(Some([size(name)?; 2])),
        (false, true, true) => Ok(Some([size(h)?, size(w)?])),
        (true, _, _) => Err(bad_param(
            OP,
            format!("{name} OR {h} and {w} may be given; not both"),
        )),
        _ => Err(bad_param(
            OP,
            format!("both {h} and {w} are required (for a non-square window)"),
        )),
    }
}

impl PoolingLayer {
    /// Reads the layer's `pooling_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "pooling_param");
        let method = match p.enum_name("pool") {
            "MAX" => PoolMethod::Max,
            "AVE" => PoolMethod::Ave,
            other => {
                return Err(bad_param(
                    OP,
                    format!("pool {other} is not supported (MAX or AVE)"),
                ));
            }
        };
        let kernel = pair(&p, "kernel_size", "kernel_h", "kernel_w")?;
        let stride = pair(&p, "stride", "stride_h", "stride_w")?.unwrap_or([1, 1]);
        let pad = pair(&p, "pad", "pad_h", "pad_w")?.unwrap_or([0, 0]);
        let window = if p.boolean("global_pooling") {
            if kernel.is_some() {
                return Err(bad_param(
                    OP,
                    "With Global_pooling: true Filter size cannot specified",
                ));
            }
            if stride != [1, 1] || pad != [0, 0] {
                return Err(bad_param(
                    OP,
                    "With Global_pooling: true; only pad = 0 and stride = 1",
                ));
            }
            Window::Global
        } else {
            let Some(kernel) = kernel.filter(|k| !k.contains(&0)) else {
                return Err(bad_param(
                    OP,
                    "kernel_size (or kernel_h and kernel_w) must be given and positive",
                ));
            };
            if stride.contains(&0) {
                return Err(bad_param(OP, "stride must be positive"));
            }
            if pad[0] >= kernel[0] || pad[1] >= kernel[1] {
                return Err(bad_param(
                    OP,
                    format!(
                        "pad {} x {} must be smaller than the kernel {} x {}",
                        pad[0], pad[1], kernel[0], kernel[1]
                    ),
                ));
            }
            Window::Sized {
                kernel,
                stride,
                pad,
            }
        };
        Ok(Self {
            method,
            window,
            floor: p.enum_name("round_mode") == "FLOOR"
                || p.get("ceil_mode") == Some(&blob_proto::ParamValue::Bool(false)),
            darknet_sizes: false,
            engine: PoolEngine::default(),
        })
    }

    /// The layer as ChenYingpeng/caffe-yolov3 sizes it: where the
    /// kernel's height exceeds the stride's by an odd number, one more
    /// output row and column (their windows clipped to the input), so
    /// that darknet's maxpool of size 2 and stride 1 keeps its map's
    /// size. Its test is on the height's kernel and stride alone, as the
    /// fork's is.
    pub(crate) fn with_darknet_sizes(self) -> Self {
        Self {
            darknet_sizes: true,
            ..self
        }
    }

    fn geometry<T: MathElement>(&self, x: &Blob<T>) -> Result<PoolGeometry> {
        let s = x.shape();
        if s.len() != 4 {
            return Err(bad_param(
                "pool",
                format!("the input is {}, not (N, C, H, W)", x.shape_string()),
            ));
        }
        let (h, w) = (s[2], s[3]);
        let (kernel, stride, pad) = match self.window {
            Window::Global => ([h, w], [1, 1], [0, 0]),
            Window::Sized {
                kernel,
                stride,
                pad,
            } => (kernel, stride, pad),
        };
        // Caffe's rule, in its signed arithmetic: ceil (or floor) of
        // (n + 2 pad - kernel) / stride, plus one, so a window larger
        // than the input still gives one output (its window clipped to
        // the input) where the span is above -stride; and with any
        // padding no window may start in the padding past the input's
        // end.
        let darknet_extra = self.darknet_sizes
            && (i128::from(kernel[0] as u64) - i128::from(stride[0] as u64)) % 2 == 1;
        let size = |a: usize, n: usize| -> Option<usize> {
            let padded = i128::from(n as u64) + 2 * i128::from(pad[a] as u64);
            let span = padded - i128::from(kernel[a] as u64);
            let step = i128::from(stride[a] as u64);
            let mut out = if self.floor {
                span.div_euclid(step) + 1
            } else {
                -(-span).div_euclid(step) + 1
            };
            out += i128::from(darknet_extra);
            if out >= 1 && pad != [0, 0] && (out - 1) * step >= i128::from((n + pad[a]) as u64) {
                out -= 1;
            }
            usize::try_from(out).ok().filter(|&o| o >= 1)
        };
        let (Some(oh), Some(ow)) = (size(0, h), size(1, w)) else {
            return Err(bad_param(
                "pool",
                format!(
                    "the input {} is too small for the {} x {} window at stride {} x {}: Caffe's arithmetic gives no output",
                    x.shape_string(),
                    kernel[0],
                    kernel[1],
                    stride[0],
                    stride[1]
                ),
            ));
        };
        Ok(PoolGeometry {
            planes: s[0] * s[1],
            h,
            w,
            oh,
            ow,
            kernel,
            stride,
            pad,
        })
    }
}

impl<T: MathElement> DynLayer<T> for PoolingLayer {
    fn type_name(&self) -> &str {
        "Pooling"
    }

    fn tops(&self) -> Arity {
        match self.method {
            PoolMethod::Max => Arity::range(1, 2),
            PoolMethod::Ave => Arity::exactly(1),
        }
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let g = self.geometry(bottoms[0])?;
        let s = bottoms[0].shape();
        let shape = vec![s[0], s[1], g.oh, g.ow];
        Ok(vec![TopShape::new(shape); tops.len().max(1)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let g = self.geometry(bottoms[0])?;
        self.engine.forward(&g, self.method, bottoms[0], tops[0])?;
        if let Some(mask) = tops.get(1) {
            max_positions(&g, &bottoms[0].cpu_data()?, &mut mask.mutable_cpu_data()?);
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
        let g = self.geometry(bottoms[0])?;
        self.engine.backward(&g, self.method, bottoms[0], tops[0])
    }

    fn backward_will_run(&mut self, will: bool) {
        self.engine.keep_positions = will;
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// Caffe's MAX mask: each window's first strict maximum from -FLT_MAX,
/// as its position in the plane (-1 where nothing beats -FLT_MAX).
fn max_positions<T: MathElement>(g: &PoolGeometry, x: &[T], mask: &mut [T]) {
    let floor = T::from_f64(-f64::from(f32::MAX));
    for (plane, out) in x.chunks(g.h * g.w).zip(mask.chunks_mut(g.oh * g.ow)) {
        for (i, m) in out.iter_mut().enumerate() {
            let (h0, h1, w0, w1) = g.window(i / g.ow, i % g.ow);
            let (mut best, mut at) = (floor, -1i64);
            for h in h0..h1 {
                for w in w0..w1 {
                    if plane[h * g.w + w] > best {
                        best = plane[h * g.w + w];
                        at = (h * g.w + w) as i64;
                    }
                }
            }
            *m = T::from_f64(at as f64);
        }
    }
}
