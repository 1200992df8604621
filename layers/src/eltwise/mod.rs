//! Caffe's Eltwise: bottoms of one shape combined element by element
//! (SUM with coefficients, PROD, MAX), as ResNet adds its shortcuts; on
//! the GPU where the blobs live there.

#[cfg(feature = "cuda")]
mod cuda;

use blob_kernels::cpu::AlignedVec;
use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::Activation;
use crate::activation::{Activate, Rectify};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::folded_activation::{leaky, relu6};
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
    mask: AlignedVec<u32>,
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
            mask: AlignedVec::new(),
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

impl<T: MathElement> EltwiseLayer<T> {
    /// Caffe's `Forward_cpu` (`Forward_gpu` where the blobs live on a
    /// GPU), then `then` over the top in place: as each value is stored
    /// for a SUM of two bottoms on the CPU, in a pass of its own
    /// otherwise.
    fn forward_summed(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        then: Option<Activation>,
    ) -> Result<()> {
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
                cuda::forward(
                    &gpu,
                    self.op,
                    &coeffs,
                    &xs,
                    as_f32(tops[0]),
                    as_f32(&self.gpu_mask),
                )?;
                return match then {
                    Some(activation) => activation.run_in_place(tops[0]),
                    None => Ok(()),
                };
            }
        }
        {
            let mut y = tops[0].mutable_cpu_data()?;
            match self.op {
                Op::Sum => {
                    // Caffe's zero fill and an axpy a bottom, the first two
                    // in one pass.
                    let c = |i: usize| T::from_f64(self.coeff(i));
                    let (x, z) = (bottoms[0].cpu_data()?, bottoms[1].cpu_data()?);
                    if let (Some(activation), 2) = (then, bottoms.len()) {
                        // One loop a variant: a choice inside the loop
                        // kept it from being vectorised (2x slower).
                        let (a, b) = (c(0), c(1));
                        use blob_kernels::cpu::sum_of_scaled_then as sum;
                        match activation {
                            Activation::Relu => sum(a, &x, b, &z, &mut y, Rectify::apply),
                            Activation::Relu6 => sum(a, &x, b, &z, &mut y, relu6),
                            Activation::LeakyRelu { negative_slope } => {
                                sum(a, &x, b, &z, &mut y, |v| leaky(negative_slope, v))
                            }
                        }
                        return Ok(());
                    }
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
        }
        match then {
            Some(activation) => activation.run_in_place(tops[0]),
            None => Ok(()),
        }
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
        self.forward_summed(bottoms, tops, None)
    }

    /// SUM with every coefficient 1 (ResNet's residual add).
    fn sums_bottoms(&self) -> bool {
        self.op == Op::Sum && self.coeffs.iter().all(|&c| c == 1.0)
    }

    /// SUM applies a folded ReLU (leaky or not, ReLU6) to each sum of
    /// two bottoms as it stores it: ResNet-50's residual adds and the
    /// ReLUs after them in one pass over the output.
    fn folds_activation(&self) -> bool {
        self.op == Op::Sum
    }

    fn forward_then(
        &mut self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
        activation: Activation,
    ) -> Result<()> {
        self.forward_summed(bottoms, tops, Some(activation))
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
                    for ((d, &g), &m) in dx.iter_mut().zip(dy.iter()).zip(self.mask.iter()) {
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

#[cfg(test)]
mod tests {
    use blob_runtime::{Blob, MathElement};

    use crate::Activation;
    use crate::registry::LayerRegistry;

    /// Values around every edge of the activations: signed zeros, NaN,
    /// infinities, past 6, tiny.
    fn values<T: MathElement>(n: usize, seed: usize) -> Vec<T> {
        let edges = [
            -0.0,
            0.0,
            f64::NAN,
            f64::NEG_INFINITY,
            f64::INFINITY,
            7.5,
            -1e-30,
        ];
        (0..n)
            .map(|i| match (i + seed) % 11 {
                j if j < edges.len() => T::from_f64(edges[j]),
                j => T::from_f64((j as f64 - 8.5) * 1.3 + seed as f64 * 0.1),
            })
            .collect()
    }

    fn bits<T: MathElement>(blob: &Blob<T>) -> Vec<u64> {
        let values = blob.to_vec().expect("the top reads back");
        values.iter().map(|v| v.to_f64().to_bits()).collect()
    }

    /// A SUM with the activation folded in gives the bits of the SUM and
    /// then the activation's own pass, for two bottoms (one pass) and
    /// three (the pass after).
    fn folded_sum_matches_the_passes_apart<T: MathElement>() {
        let reg = LayerRegistry::<T>::with_caffe_layers();
        let activations = [
            Activation::Relu,
            Activation::LeakyRelu {
                negative_slope: 0.1,
            },
            Activation::Relu6,
        ];
        for (bottoms, coeffs) in [(2, "coeff: 1 coeff: -0.5"), (3, "")] {
            let text = format!(
                r#"type: "Eltwise" {} eltwise_param {{ operation: SUM {coeffs} }}"#,
                (0..bottoms)
                    .map(|i| format!(r#"bottom: "b{i}""#))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let xs: Vec<Blob<T>> = (0..bottoms)
                .map(|b| Blob::from_vec(&[3, 40], values(120, b * 3)).expect("a bottom"))
                .collect();
            let xs: Vec<&Blob<T>> = xs.iter().collect();
            for activation in activations {
                let mut layer = reg.build_text(&text).expect("an Eltwise layer");
                let (folded, apart) = (Blob::new(&[3, 40]).unwrap(), Blob::new(&[3, 40]).unwrap());
                layer.reshape(&xs, &[&folded]).expect("shapes agree");
                assert!(layer.folds_activation());
                layer
                    .forward_then(&xs, &[&folded], activation)
                    .expect("a folded pass");
                layer.forward(&xs, &[&apart]).expect("a plain pass");
                activation
                    .run_in_place(&apart)
                    .expect("the activation's pass");
                assert_eq!(
                    bits(&folded),
                    bits(&apart),
                    "{activation:?} over {bottoms} bottoms"
                );
            }
        }
    }

    #[test]
    fn folded_sum_matches_the_passes_apart_in_f32_and_f64() {
        folded_sum_matches_the_passes_apart::<f32>();
        folded_sum_matches_the_passes_apart::<f64>();
    }
}
