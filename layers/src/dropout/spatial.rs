//! ENet's spatial dropout (TimoSaemann/caffe-enet's
//! `python/spatial_dropout.py`, a `type: "Python"` layer): whole feature
//! maps dropped, a map of each image at a time.

use blob_kernels::cpu;
use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, like_first_bottom};
use crate::layer::{Result, expect_shape, in_place};

/// `python_param { module: "spatial_dropout" layer: "SpatialDropoutLayer"
/// param_str: "{'phase': 'TRAIN', 'p': '0.01'}" }` as a layer of its own.
/// With `'phase': 'TRAIN'` each image's each channel is kept with
/// probability `1 - p` (drawn from Caffe's generator) and its map scaled
/// by `1 / (1 - p)`, or multiplied by 0; with any other phase every value
/// is scaled by `1 / (1 - p)`, as the fork's layer does (ENet's deploy
/// prototxts carry it so). The phase is `param_str`'s, not the net's,
/// as in the fork. Products as NumPy's on float32 data: `x * keep`, then
/// times the scale rounded to the blob's type (a dropped negative value
/// is -0). In a GPU net the draws are made on the host as well, so a
/// seeded run drops the same maps on either.
pub(crate) struct SpatialDropoutLayer {
    train: bool,
    p: f64,
    /// The last training pass's draws, one an image's channel.
    keep: Vec<u32>,
}

/// The `'key': 'value'` pairs of a Python dict literal on one line, the
/// quotes taken off.
fn dict_pairs(text: &str) -> Result<Vec<(String, String)>> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| {
            bad_param(
                "set up SpatialDropout",
                format!(
                    "python_param.param_str {:?} is not a Python dict ({{'phase': 'TRAIN', 'p': '0.01'}})",
                    blob_proto::excerpt(text)
                ),
            )
        })?;
    let unquote = |s: &str| s.trim().trim_matches(|c| c == '\'' || c == '"').to_string();
    inner
        .split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| match pair.split_once(':') {
            Some((key, value)) => Ok((unquote(key), unquote(value))),
            None => Err(bad_param(
                "set up SpatialDropout",
                format!("python_param.param_str: {pair:?} is not 'key': value"),
            )),
        })
        .collect()
}

impl SpatialDropoutLayer {
    /// Reads `python_param.param_str`'s `phase` and `p` (0 < p < 1, as the
    /// fork requires).
    pub(crate) fn from_python(layer: &ParamMessage) -> Result<Self> {
        let param_str = layer
            .message("python_param")
            .map_or("", |p| p.string("param_str"));
        let (mut phase, mut p) = (None, None);
        for (key, value) in dict_pairs(param_str)? {
            match key.as_str() {
                "phase" => phase = Some(value),
                "p" => {
                    p = Some(value.parse::<f64>().map_err(|_| {
                        bad_param(
                            "set up SpatialDropout",
                            format!("python_param.param_str: 'p' is {value:?}, not a number"),
                        )
                    })?)
                }
                other => {
                    return Err(bad_param(
                        "set up SpatialDropout",
                        format!(
                            "python_param.param_str names '{other}', which spatial_dropout does \
                             not read (it reads phase and p)"
                        ),
                    ));
                }
            }
        }
        let (Some(phase), Some(p)) = (phase, p) else {
            return Err(bad_param(
                "set up SpatialDropout",
                format!("python_param.param_str {param_str:?} must give 'phase' and 'p'"),
            ));
        };
        if !(p > 0.0 && p < 1.0) {
            return Err(bad_param(
                "set up SpatialDropout",
                format!("p need to be between 0 and 1: python_param.param_str gives {p}"),
            ));
        }
        Ok(Self {
            train: phase == "TRAIN",
            p,
            keep: Vec::new(),
        })
    }

    /// The fork's `scale_`, `1 / (1 - p)`, in the blob's type.
    fn scale<T: MathElement>(&self) -> T {
        T::from_f64(1.0 / (1.0 - self.p))
    }

    /// On the GPU, where both blobs are: `to = from * keep * scale` with
    /// the host's draws (every keep 1 outside training). `Ok(false)` where
    /// the CPU side runs.
    #[cfg(feature = "cuda")]
    fn on_gpu<T: MathElement>(
        &self,
        from: &Blob<T>,
        to: &Blob<T>,
        planes: usize,
        diffs: bool,
    ) -> Result<bool> {
        let Some(gpu) = crate::gpu::gpu_of_all(&[from, to]) else {
            return Ok(false);
        };
        let ones;
        let keep = if self.train {
            &self.keep
        } else {
            ones = vec![1; planes];
            &ones
        };
        use crate::gpu::as_f32;
        super::cuda::spatial(
            &gpu,
            keep,
            self.scale::<f32>(),
            as_f32(from),
            as_f32(to),
            diffs,
        )?;
        Ok(true)
    }

    /// `to = from * keep * scale`, a plane of each image's channel at a
    /// time (every keep 1 outside training).
    fn apply<T: MathElement>(&self, from: &[T], to: &mut [T], planes: usize) {
        let scale = self.scale::<T>();
        let plane = from.len() / planes.max(1);
        for (i, (to, from)) in to
            .chunks_mut(plane.max(1))
            .zip(from.chunks(plane.max(1)))
            .enumerate()
        {
            let keep = if self.train {
                T::from_f64(f64::from(self.keep[i]))
            } else {
                T::ONE
            };
            for (y, &x) in to.iter_mut().zip(from) {
                *y = x * keep * scale;
            }
        }
    }
}

impl<T: MathElement> DynLayer<T> for SpatialDropoutLayer {
    fn type_name(&self) -> &str {
        "Python"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(1)
    }

    fn tops(&self) -> Arity {
        Arity::exactly(1)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if bottoms[0].num_axes() < 2 {
            return Err(bad_param(
                "spatial dropout",
                format!(
                    "its input {} has no channel axis to drop maps along",
                    bottoms[0].shape_string()
                ),
            ));
        }
        Ok(like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        expect_shape("write spatial dropout output", y, x.shape())?;
        let planes = x.shape()[0] * x.shape()[1];
        if self.train {
            self.keep.resize(planes, 0);
            cpu::bernoulli(1.0 - self.p, &mut self.keep)
                .map_err(|e| bad_param("spatial dropout", e.to_string()))?;
        }
        #[cfg(feature = "cuda")]
        if self.on_gpu(x, y, planes, false)? {
            return Ok(());
        }
        if in_place(x, y) {
            let values = x.cpu_data()?.to_vec();
            self.apply(&values, &mut y.mutable_cpu_data()?, planes);
        } else {
            self.apply(&x.cpu_data()?, &mut y.mutable_cpu_data()?, planes);
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
        let (x, y) = (bottoms[0], tops[0]);
        let planes = x.shape()[0] * x.shape()[1];
        if self.train && self.keep.len() != planes {
            return Err(bad_param(
                "spatial dropout backward",
                format!(
                    "the forward pass drew {} maps' draws, not the {planes} of {}",
                    self.keep.len(),
                    x.shape_string()
                ),
            ));
        }
        #[cfg(feature = "cuda")]
        if self.on_gpu(y, x, planes, true)? {
            return Ok(());
        }
        if in_place(x, y) {
            let diffs = y.cpu_diff()?.to_vec();
            self.apply(&diffs, &mut x.mutable_cpu_diff()?, planes);
        } else {
            self.apply(&y.cpu_diff()?, &mut x.mutable_cpu_diff()?, planes);
        }
        Ok(())
    }
}
