//! Caffe's Pooling as a run-time layer: `pooling_param` read when the
//! net is built, the output size recomputed from every input.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::{PoolEngine, PoolGeometry, PoolMethod};
use crate::dyn_layer::{DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

const OP: &str = "set up Pooling";

/// The window, or the whole plane for `global_pooling`.
#[derive(Clone, Copy, Debug)]
enum Window {
    Square {
        kernel: usize,
        stride: usize,
        pad: usize,
    },
    Global,
}

/// Caffe `Pooling`, MAX or AVE, square windows with padding, ceil or
/// floor rounding, or global.
pub(crate) struct PoolingLayer {
    method: PoolMethod,
    window: Window,
    floor: bool,
    engine: PoolEngine,
}

/// A square size from `name` or its `_h`/`_w` pair.
fn square(p: &ParamMessage, name: &str, h: &str, w: &str) -> Result<Option<usize>> {
    match (p.has(name), p.has(h), p.has(w)) {
        (false, false, false) => Ok(None),
        (true, false, false) => Ok(Some(p.uint(name) as usize)),
        (false, true, true) if p.uint(h) == p.uint(w) => Ok(Some(p.uint(h) as usize)),
        (false, true, true) => Err(bad_param(
            OP,
            format!(
                "a rectangular window ({h} {} x {w} {}) is not supported yet",
                p.uint(h),
                p.uint(w)
            ),
        )),
        (true, _, _) => Err(bad_param(
            OP,
            format!("{name} OR {h} and {w} may be given; not both"),
        )),
        _ => Err(bad_param(OP, format!("both {h} and {w} are required"))),
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
        let kernel = square(&p, "kernel_size", "kernel_h", "kernel_w")?;
        let stride = square(&p, "stride", "stride_h", "stride_w")?.unwrap_or(1);
        let pad = square(&p, "pad", "pad_h", "pad_w")?.unwrap_or(0);
        let window = if p.boolean("global_pooling") {
            if kernel.is_some() {
                return Err(bad_param(
                    OP,
                    "With Global_pooling: true Filter size cannot specified",
                ));
            }
            if stride != 1 || pad != 0 {
                return Err(bad_param(
                    OP,
                    "With Global_pooling: true; only pad = 0 and stride = 1",
                ));
            }
            Window::Global
        } else {
            let Some(kernel) = kernel.filter(|&k| k > 0) else {
                return Err(bad_param(OP, "kernel_size must be given and positive"));
            };
            if stride == 0 {
                return Err(bad_param(OP, "stride must be positive"));
            }
            if pad >= kernel {
                return Err(bad_param(
                    OP,
                    format!("pad {pad} must be smaller than the kernel {kernel}"),
                ));
            }
            Window::Square {
                kernel,
                stride,
                pad,
            }
        };
        Ok(Self {
            method,
            window,
            floor: p.enum_name("round_mode") == "FLOOR",
            engine: PoolEngine::default(),
        })
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
            Window::Global if h != w => {
                return Err(bad_param(
                    "pool",
                    format!(
                        "global pooling over a {h} x {w} plane is not supported yet (square only)"
                    ),
                ));
            }
            Window::Global => (h, 1, 0),
            Window::Square {
                kernel,
                stride,
                pad,
            } => (kernel, stride, pad),
        };
        if h + 2 * pad < kernel || w + 2 * pad < kernel {
            return Err(bad_param(
                "pool",
                format!(
                    "the input {} is smaller than the {kernel} x {kernel} window",
                    x.shape_string()
                ),
            ));
        }
        // Caffe's rule: ceil (or floor), and with padding no window may
        // start in the padding past the input's end.
        let size = |n: usize| {
            let span = n + 2 * pad - kernel;
            let mut out = if self.floor {
                span / stride + 1
            } else {
                span.div_ceil(stride) + 1
            };
            if pad > 0 && (out - 1) * stride >= n + pad {
                out -= 1;
            }
            out
        };
        Ok(PoolGeometry {
            planes: s[0] * s[1],
            h,
            w,
            oh: size(h),
            ow: size(w),
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

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let g = self.geometry(bottoms[0])?;
        let s = bottoms[0].shape();
        Ok(vec![TopShape::new(vec![s[0], s[1], g.oh, g.ow])])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let g = self.geometry(bottoms[0])?;
        self.engine.forward(&g, self.method, bottoms[0], tops[0])
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
