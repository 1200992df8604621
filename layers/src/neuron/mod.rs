//! Caffe's other element-wise layers, each `y = f(x)` with its own
//! parameters: AbsVal, Power, ELU, BNLL, Exp, Log, Threshold, Clip,
//! Swish, and ReLU with a `negative_slope` (leaky), computed in double on the CPU
//! and the GPU alike; ReLU, Sigmoid and TanH without a slope are in
//! `activation`.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, like_first_bottom, sub_param};
use crate::folded_activation::{Activation, leaky, relu6};
use crate::layer::{Result, in_place};
#[cfg(feature = "cuda")]
pub(crate) use cuda::NEURON;

/// Which function, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Neuron {
    AbsVal,
    /// `(shift + scale x)^power`.
    Power {
        power: f64,
        scale: f64,
        shift: f64,
    },
    /// `x` or `alpha (e^x - 1)`.
    Elu {
        alpha: f64,
    },
    /// `log(1 + e^x)`, computed stably.
    Bnll,
    /// `base^(shift + scale x)`, as `e^(ln_base (shift + scale x))`.
    Exp {
        ln_base: f64,
        scale: f64,
        shift: f64,
    },
    /// `log_base(shift + scale x)`.
    Log {
        ln_base: f64,
        scale: f64,
        shift: f64,
    },
    /// `1` above the threshold, else `0`.
    Threshold {
        threshold: f64,
    },
    /// `x` clamped to `[min, max]`.
    Clip {
        min: f64,
        max: f64,
    },
    /// `x` or `slope x`.
    LeakyRelu {
        slope: f64,
    },
    /// `x sigmoid(beta x)`.
    Swish {
        beta: f64,
    },
    /// ReLU6 of the MobileNet forks: `x` clamped to `[0, 6]`, its
    /// gradient passing strictly inside, so it holds in place too.
    Relu6,
}

impl Neuron {
    fn type_name(self) -> &'static str {
        match self {
            Self::AbsVal => "AbsVal",
            Self::Power { .. } => "Power",
            Self::Elu { .. } => "ELU",
            Self::Bnll => "BNLL",
            Self::Exp { .. } => "Exp",
            Self::Log { .. } => "Log",
            Self::Threshold { .. } => "Threshold",
            Self::Clip { .. } => "Clip",
            Self::LeakyRelu { .. } => "ReLU",
            Self::Swish { .. } => "Swish",
            Self::Relu6 => "ReLU6",
        }
    }

    fn forward(self, x: f64) -> f64 {
        match self {
            Self::AbsVal => x.abs(),
            Self::Power {
                power,
                scale,
                shift,
            } => {
                if power * scale == 0.0 {
                    if power == 0.0 { 1.0 } else { shift.powf(power) }
                } else if shift == 0.0 {
                    // Caffe adds no shift of 0: -2 * 0 stays -0.
                    (scale * x).powf(power)
                } else {
                    (shift + scale * x).powf(power)
                }
            }
            Self::Elu { alpha } => {
                if x > 0.0 {
                    x
                } else {
                    // `+ 0.0`: -0 gives +0, as Caffe's sum
                    // `max(x, 0) + alpha * (exp(min(x, 0)) - 1)` does.
                    alpha * x.exp_m1() + 0.0
                }
            }
            Self::Bnll => {
                if x > 0.0 {
                    x + (-x).exp().ln_1p()
                } else {
                    x.exp().ln_1p()
                }
            }
            Self::Exp {
                ln_base,
                scale,
                shift,
            } => (ln_base * (shift + scale * x)).exp(),
            Self::Log {
                ln_base,
                scale,
                shift,
            } => (shift + scale * x).ln() / ln_base,
            Self::Threshold { threshold } => f64::from(u8::from(x > threshold)),
            Self::Clip { min, max } => x.max(min).min(max),
            // The forks' std::min(std::max(x, 0), 6): NaN stays NaN.
            Self::Relu6 => {
                if x.is_nan() {
                    x
                } else {
                    x.clamp(0.0, 6.0)
                }
            }
            Self::LeakyRelu { slope } => {
                if x > 0.0 {
                    x
                } else {
                    slope * x
                }
            }
            Self::Swish { beta } => x / (1.0 + (-beta * x).exp()),
        }
    }

    /// `dy f'(x)`, from `x` and `y`. In place `x` is `y`: the functions
    /// that allow it need only its sign there, which `y` keeps.
    fn backward(self, x: f64, y: f64, dy: f64) -> f64 {
        match self {
            Self::AbsVal => {
                dy * if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            Self::Power {
                power,
                scale,
                shift,
            } => {
                if power * scale == 0.0 {
                    0.0
                } else {
                    dy * power * scale * (shift + scale * x).powf(power - 1.0)
                }
            }
            Self::Elu { alpha } => {
                if x > 0.0 {
                    dy
                } else {
                    dy * (y + alpha)
                }
            }
            Self::Bnll => {
                let t = x.min(50.0).exp();
                dy * t / (t + 1.0)
            }
            Self::Exp { ln_base, scale, .. } => dy * y * ln_base * scale,
            Self::Log {
                ln_base,
                scale,
                shift,
            } => dy * scale / (ln_base * (shift + scale * x)),
            Self::Threshold { .. } => 0.0,
            Self::Clip { min, max } => {
                if (min..=max).contains(&x) {
                    dy
                } else {
                    0.0
                }
            }
            Self::Relu6 => {
                if x > 0.0 && x < 6.0 {
                    dy
                } else {
                    0.0
                }
            }
            Self::LeakyRelu { slope } => {
                if x > 0.0 {
                    dy
                } else {
                    dy * slope
                }
            }
            Self::Swish { beta } => {
                // Caffe's swish_layer.cpp, from the output and the sigmoid.
                let s = 1.0 / (1.0 + (-beta * x).exp());
                dy * (beta * y + s * (1.0 - beta * y))
            }
        }
    }

    /// The GPU kernels' kind number and parameters (see `neuron.cu`).
    #[cfg(feature = "cuda")]
    fn kernel_args(self) -> cuda::Kind {
        match self {
            Self::AbsVal => (0, [0.0; 3]),
            Self::Power {
                power,
                scale,
                shift,
            } => (1, [power, scale, shift]),
            Self::Elu { alpha } => (2, [alpha, 0.0, 0.0]),
            Self::Bnll => (3, [0.0; 3]),
            Self::Exp {
                ln_base,
                scale,
                shift,
            } => (4, [ln_base, scale, shift]),
            Self::Log {
                ln_base,
                scale,
                shift,
            } => (5, [ln_base, scale, shift]),
            Self::Threshold { threshold } => (6, [threshold, 0.0, 0.0]),
            Self::Clip { min, max } => (7, [min, max, 0.0]),
            Self::LeakyRelu { slope } => (8, [slope, 0.0, 0.0]),
            Self::Swish { beta } => (9, [beta, 0.0, 0.0]),
            Self::Relu6 => (10, [0.0; 3]),
        }
    }

    /// Whether backward can work from the output alone (in place).
    fn in_place_ok(self) -> bool {
        matches!(
            self,
            Self::Elu { alpha } if alpha >= 0.0
        ) || matches!(
            self,
            Self::Exp { .. } | Self::Threshold { .. } | Self::Relu6
        ) || matches!(self, Self::LeakyRelu { slope } if slope >= 0.0)
    }
}

/// One of Caffe's element-wise layers.
pub(crate) struct NeuronLayer {
    neuron: Neuron,
}

impl NeuronLayer {
    /// Caffe's ReLU with a `negative_slope`, to run a folded one apart.
    pub(crate) fn leaky_relu(negative_slope: f64) -> Self {
        Self {
            neuron: Neuron::LeakyRelu {
                slope: negative_slope,
            },
        }
    }

    /// The forks' ReLU6, to run a folded one apart.
    pub(crate) fn relu6() -> Self {
        Self {
            neuron: Neuron::Relu6,
        }
    }
}

/// `ln(base)` of an Exp or Log layer's base (-1: e).
fn ln_base(p: &ParamMessage, op: &'static str) -> Result<f64> {
    let base = p.float("base");
    if base == -1.0 {
        return Ok(1.0);
    }
    if base <= 0.0 {
        return Err(bad_param(
            op,
            format!("base must be strictly positive, or -1 for e; got {base}"),
        ));
    }
    Ok(base.ln())
}

impl NeuronLayer {
    /// The layer of `layer`'s type from its parameters.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let neuron = match layer.string("type") {
            "AbsVal" => Neuron::AbsVal,
            "Power" => {
                let p = sub_param(layer, "power_param");
                Neuron::Power {
                    power: p.float("power"),
                    scale: p.float("scale"),
                    shift: p.float("shift"),
                }
            }
            "ELU" => Neuron::Elu {
                alpha: sub_param(layer, "elu_param").float("alpha"),
            },
            "BNLL" => Neuron::Bnll,
            "Exp" => {
                let p = sub_param(layer, "exp_param");
                Neuron::Exp {
                    ln_base: ln_base(&p, "set up Exp")?,
                    scale: p.float("scale"),
                    shift: p.float("shift"),
                }
            }
            "Log" => {
                let p = sub_param(layer, "log_param");
                Neuron::Log {
                    ln_base: ln_base(&p, "set up Log")?,
                    scale: p.float("scale"),
                    shift: p.float("shift"),
                }
            }
            "Threshold" => Neuron::Threshold {
                threshold: sub_param(layer, "threshold_param").float("threshold"),
            },
            "Clip" => {
                let p = sub_param(layer, "clip_param");
                if !p.has("min") || !p.has("max") {
                    return Err(bad_param("set up Clip", "both min and max are required"));
                }
                Neuron::Clip {
                    min: p.float("min"),
                    max: p.float("max"),
                }
            }
            "Swish" => Neuron::Swish {
                beta: sub_param(layer, "swish_param").float("beta"),
            },
            "ReLU6" => Neuron::Relu6,
            _ => Neuron::LeakyRelu {
                slope: sub_param(layer, "relu_param").float("negative_slope"),
            },
        };
        Ok(Self { neuron })
    }
}

/// `y = f(x)` on the cores, in place where the top is the bottom.
fn map_on_cores<T: MathElement>(
    bottom: &Blob<T>,
    top: &Blob<T>,
    f: impl Fn(T) -> T + Sync + Send + Copy,
) -> Result<()> {
    if in_place(bottom, top) {
        blob_kernels::cpu::map_in_place(&mut top.mutable_cpu_data()?, f);
    } else {
        let (x, mut y) = (bottom.cpu_data()?, top.mutable_cpu_data()?);
        blob_kernels::cpu::map(&x, &mut y, f);
    }
    Ok(())
}

impl<T: MathElement> DynLayer<T> for NeuronLayer {
    fn type_name(&self) -> &str {
        self.neuron.type_name()
    }

    fn activation(&self) -> Option<Activation> {
        match self.neuron {
            Neuron::LeakyRelu { slope } => Some(Activation::LeakyRelu {
                negative_slope: slope,
            }),
            Neuron::Relu6 => Some(Activation::Relu6),
            _ => None,
        }
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Ok(like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("element-wise", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::as_f32;
            let args = self.neuron.kernel_args();
            return cuda::forward(&gpu, args, as_f32(bottoms[0]), as_f32(tops[0]));
        }
        // On the cores. ReLU6 in the blob's type (its clamp is exact
        // there), and the leaky ReLU with its one product alone in double,
        // so both vectorize: MobileNetV2's nets run 59 ReLU6s, darknet's
        // YOLOs a leaky ReLU after every convolution.
        match self.neuron {
            Neuron::Relu6 => map_on_cores(bottoms[0], tops[0], relu6::<T>),
            Neuron::LeakyRelu { slope } => {
                map_on_cores(bottoms[0], tops[0], move |v: T| leaky(slope, v))
            }
            // Caffe's steps in the blob's type: the scale, then the
            // shift (each only where it changes something), then the
            // power; in double, the scale and shift were rounded once
            // rather than Caffe's twice, and a per-value `powf` made a
            // plain scale and shift (an input's normalisation) 30x
            // slower.
            Neuron::Power {
                power,
                scale,
                shift,
            } if power * scale != 0.0 => {
                let (scale, shift) = (T::from_f64(scale), T::from_f64(shift));
                let affine = move |v: T| {
                    let v = if scale != T::ONE { v * scale } else { v };
                    if shift != T::ZERO { v + shift } else { v }
                };
                if power == 1.0 {
                    map_on_cores(bottoms[0], tops[0], affine)
                } else {
                    map_on_cores(bottoms[0], tops[0], move |v: T| {
                        T::from_f64(affine(v).to_f64().powf(power))
                    })
                }
            }
            neuron => map_on_cores(bottoms[0], tops[0], move |v: T| {
                T::from_f64(neuron.forward(v.to_f64()))
            }),
        }
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
        if matches!(self.neuron, Neuron::Threshold { .. }) {
            return Err(bad_param(
                "threshold backward",
                "Threshold has no backward pass (Caffe's neither)",
            ));
        }
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("element-wise", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::as_f32;
            let args = self.neuron.kernel_args();
            return cuda::backward(&gpu, args, as_f32(bottoms[0]), as_f32(tops[0]));
        }
        let (x, y, dy) = (
            bottoms[0].to_vec()?,
            tops[0].to_vec()?,
            tops[0].diff_to_vec()?,
        );
        let same = in_place(bottoms[0], tops[0]);
        for (i, d) in bottoms[0].mutable_cpu_diff()?.iter_mut().enumerate() {
            let input = if same { y[i] } else { x[i] };
            *d = T::from_f64(
                self.neuron
                    .backward(input.to_f64(), y[i].to_f64(), dy[i].to_f64()),
            );
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        self.neuron.in_place_ok()
    }
}
