//! `Axpy` of the SENet Caffe models' forks: `a * x + y` with one `a` per
//! (item, channel), the squeeze-and-excitation gate and the residual sum
//! in one layer.

use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// Bottoms `a` (N, C, 1, 1), `x` and `y` (N, C, H, W); top `a * x + y`.
pub(crate) struct AxpyLayer;

impl AxpyLayer {
    /// `(N * C, plane)`, with the shapes checked.
    fn dims<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<(usize, usize)> {
        let (a, x, y) = (bottoms[0].shape(), bottoms[1].shape(), bottoms[2].shape());
        let gates_fit =
            x.len() >= 2 && a.len() >= 2 && a[..2] == x[..2] && a[2..].iter().all(|&d| d == 1);
        if !gates_fit || x != y {
            return Err(bad_param(
                "Axpy",
                format!(
                    "the bottoms are {}, {} and {}; Axpy needs a (N, C, 1, 1) gate and two \
                     inputs of one (N, C, ...) shape",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string(),
                    bottoms[2].shape_string()
                ),
            ));
        }
        Ok((x[0] * x[1], x[2..].iter().product()))
    }
}

impl<T: MathElement> DynLayer<T> for AxpyLayer {
    fn type_name(&self) -> &str {
        "Axpy"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(3)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Self::dims(bottoms)?;
        Ok(vec![TopShape::new(bottoms[1].shape().to_vec())])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (_, plane) = Self::dims(bottoms)?;
        let a = bottoms[0].cpu_data()?;
        let x = bottoms[1].cpu_data()?;
        let y = bottoms[2].cpu_data()?;
        let mut out = tops[0].mutable_cpu_data()?;
        for (((o, x), y), &a) in out
            .chunks_mut(plane.max(1))
            .zip(x.chunks(plane.max(1)))
            .zip(y.chunks(plane.max(1)))
            .zip(a.iter())
        {
            for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                *o = a * x + y;
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
        let (_, plane) = Self::dims(bottoms)?;
        let plane = plane.max(1);
        let dy = tops[0].cpu_diff()?;
        if propagate_down[0] {
            let x = bottoms[1].cpu_data()?;
            let mut da = bottoms[0].mutable_cpu_diff()?;
            for ((d, x), g) in da.iter_mut().zip(x.chunks(plane)).zip(dy.chunks(plane)) {
                let sum: f64 = x.iter().zip(g).map(|(x, g)| x.to_f64() * g.to_f64()).sum();
                *d = T::from_f64(sum);
            }
        }
        if propagate_down[1] {
            let a = bottoms[0].cpu_data()?;
            let mut dx = bottoms[1].mutable_cpu_diff()?;
            for ((d, g), &a) in dx.chunks_mut(plane).zip(dy.chunks(plane)).zip(a.iter()) {
                for (d, &g) in d.iter_mut().zip(g) {
                    *d = a * g;
                }
            }
        }
        if propagate_down[2] {
            bottoms[2].mutable_cpu_diff()?.copy_from_slice(&dy);
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
