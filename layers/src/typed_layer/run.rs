//! A typed layer run by a net: [`DynTyped`] checks the net's blobs
//! against the declared shapes and hands the layer typed views; a
//! [`CandidateSet`] picks, among the registered instances of one Caffe
//! type (`Gain<16>`, `Gain<32>`), the one whose bottoms' shapes the net's
//! blobs have.

use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::Arc;

use blob_proto::ParamMessage;
use blob_runtime::typed::ShapeError;
use blob_runtime::{Blob, BlobError, MathElement};

use super::shapes::Mismatch;
use super::{BlobShapes, TypedLayer};
use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param};
use crate::layer::Result;

/// A [`TypedLayer`] as the [`DynLayer`] a net runs (and the
/// [`GradientChecker`](crate::check::GradientChecker) checks): it owns
/// the parameter blobs, made at their declared shapes when it is, and
/// views every blob through its declared shape before each pass.
///
/// ```
/// # use blob_layers::typed_layer::{DynTyped, TypedLayer};
/// # use blob_runtime::{Blob, Result, typed::{D, Dyn, TypedBlob}};
/// /// `y = x + 1` on rows of 2.
/// struct AddOne;
/// impl TypedLayer<f64> for AddOne {
///     const TYPE: &'static str = "AddOne";
///     type Bottoms = ((Dyn, D<2>),);
///     type Tops = ((Dyn, D<2>),);
///     type Params = ();
///     fn from_param(_: &blob_proto::ParamMessage) -> Result<Self> { Ok(AddOne) }
///     fn forward(&mut self, (x,): (&TypedBlob<f64, (Dyn, D<2>)>,), (y,): (&TypedBlob<f64, (Dyn, D<2>)>,), _: ()) -> Result<()> {
///         let x = x.to_vec()?;
///         y.mutable_cpu_data()?.iter_mut().zip(x).for_each(|(y, x)| *y = x + 1.0);
///         Ok(())
///     }
///     fn backward(&mut self, (y,): (&TypedBlob<f64, (Dyn, D<2>)>,), down: &[bool], (x,): (&TypedBlob<f64, (Dyn, D<2>)>,), _: ()) -> Result<()> {
///         if down[0] { x.mutable_cpu_diff()?.copy_from_slice(&y.cpu_diff()?); }
///         Ok(())
///     }
/// }
/// let x = Blob::<f64>::from_vec(&[3, 2], vec![1.0; 6])?;
/// let report = blob_layers::check::GradientChecker::default().check(&mut DynTyped::new(AddOne)?, &[x])?;
/// assert_eq!(report.checked, 6);
///
/// // A blob of another shape is refused before the layer sees it.
/// use blob_layers::DynLayer;
/// let wide = Blob::<f64>::new(&[3, 5])?;
/// let err = DynTyped::new(AddOne)?.reshape(&[&wide], &[&Blob::default()]).unwrap_err();
/// assert!(err.to_string().contains("bottom 0 has shape 3 5 (15), but AddOne takes _ 2"), "{err}");
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct DynTyped<T: MathElement, L: TypedLayer<T>> {
    layer: L,
    params: Vec<Blob<T>>,
    _element: PhantomData<fn() -> T>,
}

impl<T: MathElement, L: TypedLayer<T>> DynTyped<T, L> {
    /// The layer, its parameter blobs made at their declared shapes and
    /// filled by [`TypedLayer::init_params`].
    pub fn new(mut layer: L) -> Result<Self> {
        let params = L::Params::dims()
            .into_iter()
            .map(|dims| Blob::new(&dims.iter().map(|d| d.unwrap_or(0)).collect::<Vec<_>>()))
            .collect::<Result<Vec<_>>>()?;
        layer.init_params(views::<T, L, L::Params>("parameter blob", &refs(&params))?)?;
        Ok(Self {
            layer,
            params,
            _element: PhantomData,
        })
    }

    /// The typed layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The typed layer, mutably.
    pub fn layer_mut(&mut self) -> &mut L {
        &mut self.layer
    }
}

fn refs<T: MathElement>(blobs: &[Blob<T>]) -> Vec<&Blob<T>> {
    blobs.iter().collect()
}

/// The layer's type for messages: its path's last part, generics kept
/// (`Gain<32>`).
fn short_name<L>() -> String {
    let full = std::any::type_name::<L>();
    let head = full.split('<').next().unwrap_or(full);
    let start = head.rfind("::").map_or(0, |i| i + 2);
    full[start..].to_string()
}

/// `blobs` viewed as `S`, the layer's declared shapes for `role`s.
fn views<'a, T: MathElement, L: TypedLayer<T>, S: BlobShapes>(
    role: &str,
    blobs: &[&'a Blob<T>],
) -> Result<S::Views<'a, T>> {
    if blobs.len() != S::LEN {
        return Err(bad_param(
            "run a typed layer",
            format!(
                "{} takes {} {role}s, given {}",
                short_name::<L>(),
                S::LEN,
                blobs.len()
            ),
        ));
    }
    S::views(blobs).map_err(|Mismatch { index, error }| refused::<L>(role, index, error))
}

fn refused<L>(role: &str, index: usize, error: ShapeError) -> BlobError {
    let detail = match error {
        ShapeError::Mismatch {
            found,
            expected,
            detail,
        } => format!(
            "{role} {index} has shape {found}, but {} takes {expected} ({detail})",
            short_name::<L>()
        ),
        other => format!("{role} {index}: {other}"),
    };
    bad_param("run a typed layer", detail)
}

impl<T: MathElement, L: TypedLayer<T>> DynLayer<T> for DynTyped<T, L> {
    fn type_name(&self) -> &str {
        L::TYPE
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(L::Bottoms::LEN)
    }

    fn tops(&self) -> Arity {
        Arity::exactly(L::Tops::LEN)
    }

    /// The tops at their declared shapes, each run-time dim taking the
    /// first bottom's run-time dim (the batch).
    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        views::<T, L, L::Bottoms>("bottom", bottoms)?;
        let batch = L::Bottoms::dims()
            .iter()
            .zip(bottoms)
            .find_map(|(dims, blob)| {
                dims.iter()
                    .position(Option::is_none)
                    .map(|a| blob.shape()[a])
            });
        L::Tops::dims()
            .into_iter()
            .enumerate()
            .map(|(i, dims)| {
                let shape = dims
                    .iter()
                    .map(|d| match (d, batch) {
                        (Some(d), _) => Ok(*d),
                        (None, Some(n)) => Ok(n),
                        (None, None) => Err(bad_param(
                            "shape a typed layer's tops",
                            format!(
                                "top {i} of {} has a run-time dim, but no bottom has one to \
                                 take its value from",
                                short_name::<L>()
                            ),
                        )),
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(TopShape::new(shape))
            })
            .collect()
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let b = views::<T, L, L::Bottoms>("bottom", bottoms)?;
        let t = views::<T, L, L::Tops>("top", tops)?;
        let params = refs(&self.params);
        let p = views::<T, L, L::Params>("parameter blob", &params)?;
        self.layer.forward(b, t, p)
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let t = views::<T, L, L::Tops>("top", tops)?;
        let b = views::<T, L, L::Bottoms>("bottom", bottoms)?;
        let params = refs(&self.params);
        let p = views::<T, L, L::Params>("parameter blob", &params)?;
        self.layer.backward(t, propagate_down, b, p)
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.params
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.params
    }

    fn is_loss(&self) -> bool {
        L::LOSS
    }

    fn allows_in_place(&self) -> bool {
        L::IN_PLACE
    }
}

/// One registered instance of a typed layer, its types left behind.
pub(crate) struct Candidate<T: MathElement> {
    id: TypeId,
    name: String,
    bottoms: fn() -> String,
    bottom_count: usize,
    top_count: usize,
    loss: bool,
    in_place: bool,
    fits: fn(&[&Blob<T>]) -> bool,
    build: fn(&ParamMessage) -> Result<Box<dyn DynLayer<T>>>,
}

impl<T: MathElement> Candidate<T> {
    pub(crate) fn of<L: TypedLayer<T>>() -> Self {
        Self {
            id: TypeId::of::<L>(),
            name: short_name::<L>(),
            bottoms: L::Bottoms::describe,
            bottom_count: L::Bottoms::LEN,
            top_count: L::Tops::LEN,
            loss: L::LOSS,
            in_place: L::IN_PLACE,
            fits: |blobs| blobs.len() == L::Bottoms::LEN && L::Bottoms::views(blobs).is_ok(),
            build: |param| Ok(Box::new(DynTyped::new(L::from_param(param)?)?)),
        }
    }
}

/// The instances registered under one Caffe type name. With one, a layer
/// is that instance; with several, the choice waits for the first
/// reshape, where the bottoms' shapes pick the instance that takes them.
pub(crate) struct CandidateSet<T: MathElement> {
    candidates: Vec<Arc<Candidate<T>>>,
}

impl<T: MathElement> Clone for CandidateSet<T> {
    fn clone(&self) -> Self {
        Self {
            candidates: self.candidates.clone(),
        }
    }
}

impl<T: MathElement> CandidateSet<T> {
    pub(crate) fn new() -> Self {
        Self {
            candidates: Vec::new(),
        }
    }

    /// Adds `candidate` unless its layer type is in already.
    pub(crate) fn add(&mut self, candidate: Candidate<T>) {
        if !self.candidates.iter().any(|c| c.id == candidate.id) {
            self.candidates.push(Arc::new(candidate));
        }
    }

    /// A layer built from `param`: the one instance, or one that picks
    /// at its first reshape.
    pub(crate) fn build(&self, param: &ParamMessage) -> Result<Box<dyn DynLayer<T>>> {
        match self.candidates.as_slice() {
            [one] => (one.build)(param),
            _ => Ok(Box::new(Undecided {
                type_name: param.string("type").to_string(),
                param: param.clone(),
                candidates: self.candidates.clone(),
                chosen: None,
            })),
        }
    }
}

/// A layer of a type registered at several shapes, before its bottoms
/// have chosen one.
struct Undecided<T: MathElement> {
    type_name: String,
    param: ParamMessage,
    candidates: Vec<Arc<Candidate<T>>>,
    chosen: Option<Box<dyn DynLayer<T>>>,
}

impl<T: MathElement> Undecided<T> {
    fn span(&self, count: fn(&Candidate<T>) -> usize) -> Arity {
        let counts = self.candidates.iter().map(|c| count(c));
        let min = counts.clone().min().unwrap_or(0);
        Arity::range(min, counts.max().unwrap_or(0))
    }

    fn chosen(&mut self) -> Result<&mut Box<dyn DynLayer<T>>> {
        self.chosen.as_mut().ok_or_else(|| {
            bad_param(
                "run a typed layer",
                "it was never reshaped, so no instance was chosen",
            )
        })
    }
}

impl<T: MathElement> DynLayer<T> for Undecided<T> {
    fn type_name(&self) -> &str {
        &self.type_name
    }

    fn bottoms(&self) -> Arity {
        self.chosen
            .as_ref()
            .map_or_else(|| self.span(|c| c.bottom_count), |l| l.bottoms())
    }

    fn tops(&self) -> Arity {
        self.chosen
            .as_ref()
            .map_or_else(|| self.span(|c| c.top_count), |l| l.tops())
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.chosen.is_none() {
            let Some(fit) = self.candidates.iter().find(|c| (c.fits)(bottoms)) else {
                let given: Vec<String> = bottoms.iter().map(|b| b.shape_string()).collect();
                let known: Vec<String> = self
                    .candidates
                    .iter()
                    .map(|c| format!("{} takes {}", c.name, (c.bottoms)()))
                    .collect();
                return Err(bad_param(
                    "choose a typed layer by its bottoms",
                    format!(
                        "no registered {} takes bottoms of shape {}: {}",
                        self.type_name,
                        given.join(", "),
                        known.join("; ")
                    ),
                ));
            };
            self.chosen = Some((fit.build)(&self.param)?);
        }
        self.chosen()?.reshape(bottoms, tops)
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.chosen()?.forward(bottoms, tops)
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        self.chosen()?.backward(tops, propagate_down, bottoms)
    }

    fn blobs(&self) -> &[Blob<T>] {
        self.chosen.as_ref().map_or(&[], |l| l.blobs())
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        match self.chosen.as_mut() {
            Some(l) => l.blobs_mut(),
            None => &mut [],
        }
    }

    /// Asked before the first reshape: a loss if any instance is one.
    fn is_loss(&self) -> bool {
        self.candidates.iter().any(|c| c.loss)
    }

    /// Asked before the first reshape: in place only if every instance
    /// may run so.
    fn allows_in_place(&self) -> bool {
        self.candidates.iter().all(|c| c.in_place)
    }
}
