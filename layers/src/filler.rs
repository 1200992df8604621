//! Caffe's weight fillers.

use blob_kernels::cpu;

use blob_runtime::{Blob, BlobError, MathElement};

/// Caffe `XavierFiller` (variance_norm FAN_IN): uniform on
/// `[-sqrt(3 / fan_in), sqrt(3 / fan_in)]`, `fan_in = count / shape[0]`,
/// from the calling thread's generator ([`cpu::set_seed`]), for `f32`
/// and `f64` blobs.
///
/// ```
/// let w = blob_runtime::Blob::<f32>::new(&[20, 1, 5, 5])?;
/// blob_layers::filler::xavier(&w)?;
/// let scale = (3.0f32 / 25.0).sqrt();
/// assert!(w.cpu_data()?.iter().all(|v| v.abs() <= scale));
/// let w64 = blob_runtime::Blob::<f64>::new(&[4, 8])?;
/// blob_layers::filler::xavier(&w64)?;
/// assert!(w64.cpu_data()?.iter().all(|v| v.abs() <= (3.0f64 / 8.0).sqrt()));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn xavier<T: MathElement>(blob: &Blob<T>) -> Result<(), BlobError> {
    let num = blob.shape().first().copied().unwrap_or(1).max(1);
    let fan_in = (blob.count() / num).max(1) as f64;
    let scale = T::from_f64((3.0 / fan_in).sqrt());
    cpu::uniform(-scale, scale, &mut blob.mutable_cpu_data()?)
        .expect("scale is finite and positive");
    Ok(())
}

/// Caffe `ConstantFiller`, for `f32` and `f64` blobs.
///
/// ```
/// let b = blob_runtime::Blob::<f32>::new(&[3])?;
/// blob_layers::filler::constant(&b, 0.1)?;
/// assert_eq!(&*b.cpu_data()?, &[0.1; 3]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn constant<T: MathElement>(blob: &Blob<T>, value: T) -> Result<(), BlobError> {
    blob.mutable_cpu_data()?.fill(value);
    Ok(())
}

/// Fills `blob` as a Caffe `FillerParameter` says (Caffe's
/// `GetFiller`): `constant` (value), `uniform` (min, max), `gaussian`
/// (mean, std, and `sparse`: each weight kept with probability
/// `sparse / num_outputs`), `positive_unitball` (positive, each of the
/// `shape[0]` rows summing to 1), `xavier` and `msra` (with
/// `variance_norm`), `bilinear` (a deconvolution's upsampling kernel),
/// for `f32` and `f64`, from the calling thread's generator. Any other
/// type is an error naming it.
///
/// ```
/// use blob_proto::{ParamMessage, ParamValue, schema};
/// let mut param = ParamMessage::new(&schema::FILLER);
/// param.set("type", ParamValue::Str("uniform".into()));
/// param.set("min", ParamValue::Float(-0.5));
/// param.set("max", ParamValue::Float(0.5));
/// let w = blob_runtime::Blob::<f64>::new(&[10, 4])?;
/// blob_layers::filler::fill(&w, &param)?;
/// assert!(w.cpu_data()?.iter().all(|v| v.abs() <= 0.5));
///
/// // Caffe's bilinear kernel for 2x upsampling (kernel 4).
/// param.set("type", ParamValue::Str("bilinear".into()));
/// let k = blob_runtime::Blob::<f32>::new(&[1, 1, 4, 4])?;
/// blob_layers::filler::fill(&k, &param)?;
/// assert_eq!(&k.cpu_data()?[..4], &[0.0625, 0.1875, 0.1875, 0.0625]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn fill<T: MathElement>(
    blob: &Blob<T>,
    param: &blob_proto::ParamMessage,
) -> Result<(), BlobError> {
    let bad = |detail: String| BlobError::InvalidParameter {
        op: "fill a parameter blob",
        detail,
    };
    let kind = param.string("type");
    let f = |name: &str| T::from_f64(param.float(name));
    let num = blob.shape().first().copied().unwrap_or(1).max(1);
    let fan_in = (blob.count() / num).max(1) as f64;
    let fan_out = if blob.num_axes() > 1 {
        (blob.count() / blob.shape()[1].max(1)) as f64
    } else {
        blob.count().max(1) as f64
    };
    let norm = match param.enum_name("variance_norm") {
        "FAN_OUT" => fan_out,
        "AVERAGE" => (fan_in + fan_out) / 2.0,
        _ => fan_in,
    };
    let mut data = blob.mutable_cpu_data()?;
    let drawn = match kind {
        "constant" => {
            data.fill(f("value"));
            Ok(())
        }
        "uniform" => cpu::uniform(f("min"), f("max"), &mut data),
        "gaussian" => cpu::gaussian(f("mean"), f("std"), &mut data).and_then(|()| {
            let sparse = param.int("sparse");
            if sparse < 0 {
                return Ok(());
            }
            // Caffe: each weight survives with probability sparse /
            // num_outputs, num_outputs being the blob's first dim.
            let keep = (sparse as f64 / num as f64).min(1.0);
            let mut mask = vec![0u32; data.len()];
            cpu::bernoulli(keep, &mut mask)?;
            for (v, m) in data.iter_mut().zip(mask) {
                if m == 0 {
                    *v = T::ZERO;
                }
            }
            Ok(())
        }),
        "positive_unitball" => cpu::uniform(T::ZERO, T::ONE, &mut data).map(|()| {
            let row = (data.len() / num).max(1);
            for r in data.chunks_mut(row) {
                let sum = r.iter().fold(T::ZERO, |a, &v| a + v);
                if sum > T::ZERO {
                    r.iter_mut().for_each(|v| *v = *v / sum);
                }
            }
        }),
        "bilinear" => {
            let shape = blob.shape();
            if shape.len() != 4 || shape[2] != shape[3] {
                return Err(bad(format!(
                    "a bilinear filler needs a 4-axis blob with a square kernel, not {shape:?}"
                )));
            }
            let k = shape[3];
            let factor = k.div_ceil(2) as f64;
            let center = (k as f64 - 1.0) / (2.0 * factor);
            for (i, v) in data.iter_mut().enumerate() {
                let x = (i % k) as f64;
                let y = ((i / k) % k) as f64;
                *v = T::from_f64(
                    (1.0 - (x / factor - center).abs()) * (1.0 - (y / factor - center).abs()),
                );
            }
            Ok(())
        }
        "xavier" => {
            let scale = T::from_f64((3.0 / norm).sqrt());
            cpu::uniform(-scale, scale, &mut data)
        }
        "msra" => cpu::gaussian(T::ZERO, T::from_f64((2.0 / norm).sqrt()), &mut data),
        other => {
            return Err(bad(format!(
                "unknown filler type \"{other}\" (known: constant, uniform, gaussian, positive_unitball, xavier, msra, bilinear)"
            )));
        }
    };
    drawn.map_err(|e| bad(format!("{kind} filler: {e}")))
}
