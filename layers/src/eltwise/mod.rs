//! Caffe's Eltwise: bottoms of one shape combined element by element
//! (SUM with coefficients, PROD, MAX), as ResNet adds its shortcuts; on
//! the GPU where the blobs live there.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::{Result, ensure};

#[cfg(feature = "cuda")]
pub(crate) use cuda::ELTWISE;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Prod,
    Sum,
    Max,
}

/// Caffe `Eltwise`, never in place (Caffe computes garbage there).
pub(crate) struct EltwiseLayer<T: MathElement> {
    op: Op,
    coeffs: Vec<f64>,
    stable_prod_grad: bool,
    /// MAX: which bottom gave each value.
    mask: Vec<u32>,
    /// The same on the GPU, each index as a float.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    gpu_mask: Blob<T>,
}

impl<T: MathElement> EltwiseLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "eltwise_param");
        let op = match p.enum_name("operation") {
            "PROD" => Op::Prod,
            "MAX" => Op::Max,
            _ => Op::Sum,
        };
        let coeffs = p.floats("coeff");
        let bottoms = layer.strings("bottom").count();
        if !coeffs.is_empty() && op == Op::Prod {
            return Err(bad_param(
                "set up Eltwise",
                "Eltwise layer only takes coefficients for summation.",
            ));
        }
        if !coeffs.is_empty() && coeffs.len() != bottoms {
            return Err(bad_param(
                "set up Eltwise",
                format!(
                    "Eltwise Layer takes one coefficient per bottom blob: {} for {bottoms}",
                    coeffs.len()
                ),
            ));
        }
        Ok(Self {
            op,
            coeffs,
            stable_prod_grad: p.boolean("stable_prod_grad"),
            mask: Vec::new(),
            gpu_mask: Blob::default(),
        })
    }

    fn coeff(&self, i: usize) -> f64 {
        self.coeffs.get(i).copied().unwrap_or(1.0)
    }

    #[cfg(feature = "cuda")]
    fn f32_coeffs(&self, bottoms: usize) -> Vec<f32> {
        (0..bottoms).map(|i| self.coeff(i) as f32).collect()
    }
}

impl<T: MathElement> DynLayer<T> for EltwiseLayer<T> {
    fn type_name(&self) -> &str {
        "Eltwise"
    }

    fn bottoms(&self) -> Arity {
        Arity::at_least(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        for b in &bottoms[1..] {
            if b.shape() != bottoms[0].shape() {
                return Err(bad_param(
                    "eltwise",
                    format!(
                        "bottom shapes differ: {} and {}",
                        bottoms[0].shape_string(),
                        b.shape_string()
                    ),
                ));
            }
        }
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        #[cfg(feature = "cuda")]
        {
            let others: Vec<(&str, &Blob<T>)> = std::iter::once(("output", tops[0]))
                .chain(bottoms[1..].iter().map(|b| ("another bottom", *b)))
                .collect();
            if let Some(gpu) = crate::gpu::gpu_for("eltwise", bottoms[0], &others)? {
                use crate::gpu::as_f32;
                if self.op == Op::Max {
                    crate::softmax::place_with(&mut self.gpu_mask, tops[0], tops[0].shape())?;
                }
                let xs: Vec<&Blob<f32>> = bottoms.iter().map(|b| as_f32(*b)).collect();
                let coeffs = self.f32_coeffs(bottoms.len());
                return cuda::forward(
                    &gpu,
                    self.op,
                    &coeffs,
                    &xs,
                    as_f32(tops[0]),
                    as_f32(&self.gpu_mask),
                );
            }
        }
        let mut y = tops[0].mutable_cpu_data()?;
        match self.op {
            Op::Sum => {
                // Caffe's zero fill and an axpy a bottom, the first two
                // in one pass.
                let c = |i: usize| T::from_f64(self.coeff(i));
                let (x, z) = (bottoms[0].cpu_data()?, bottoms[1].cpu_data()?);
                blob_kernels::cpu::sum_of_scaled(c(0), &x, c(1), &z, &mut y);
                for (i, b) in bottoms.iter().enumerate().skip(2) {
                    blob_kernels::cpu::axpy(c(i), &b.cpu_data()?, &mut y);
                }
            }
            Op::Prod => {
                y.copy_from_slice(&bottoms[0].cpu_data()?);
                for b in &bottoms[1..] {
                    for (o, &v) in y.iter_mut().zip(b.cpu_data()?.iter()) {
                        *o *= v;
                    }
                }
            }
            Op::Max => {
                ensure(&mut self.mask, y.len())?;
                let (a, b) = (bottoms[0].cpu_data()?, bottoms[1].cpu_data()?);
                // Bottoms 0 and 1: a tie goes to 1 (Caffe's strict a > b).
                for (j, (o, m)) in y.iter_mut().zip(self.mask.iter_mut()).enumerate() {
                    (*o, *m) = if a[j] > b[j] { (a[j], 0) } else { (b[j], 1) };
                }
                for (i, c) in bottoms.iter().enumerate().skip(2) {
                    for (j, &v) in c.cpu_data()?.iter().enumerate() {
                        if v > y[j] {
                            y[j] = v;
                            self.mask[j] = i as u32;
                        }
                    }
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
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("eltwise", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::as_f32;
            let xs: Vec<&Blob<f32>> = bottoms.iter().map(|b| as_f32(*b)).collect();
            let coeffs = self.f32_coeffs(bottoms.len());
            return cuda::backward(
                &gpu,
                (self.op, self.stable_prod_grad),
                &coeffs,
                (as_f32(tops[0]), as_f32(&self.gpu_mask)),
                propagate_down,
                &xs,
            );
        }
        let dy = tops[0].cpu_diff()?;
        let y = tops[0].cpu_data()?;
        for (i, b) in bottoms.iter().enumerate() {
            if !propagate_down[i] {
                continue;
            }
            let mut dx = b.mutable_cpu_diff()?;
            match self.op {
                Op::Sum => {
                    let c = T::from_f64(self.coeff(i));
                    for (d, &g) in dx.iter_mut().zip(dy.iter()) {
                        *d = g * c;
                    }
                }
                Op::Prod if self.stable_prod_grad => {
                    dx.copy_from_slice(&dy);
                    for (j, other) in bottoms.iter().enumerate() {
                        if j != i {
                            for (d, &v) in dx.iter_mut().zip(other.cpu_data()?.iter()) {
                                *d *= v;
                            }
                        }
                    }
                }
                Op::Prod => {
                    let x = b.cpu_data()?;
                    for (((d, &g), &o), &v) in
                        dx.iter_mut().zip(dy.iter()).zip(y.iter()).zip(x.iter())
                    {
                        *d = g * o / v;
                    }
                }
                Op::Max => {
                    for ((d, &g), &m) in dx.iter_mut().zip(dy.iter()).zip(&self.mask) {
                        *d = if m as usize == i { g } else { T::ZERO };
                    }
                }
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
