//! Caffe's `Net`: a net built at run time from a `.prototxt` (or a
//! `NetParameter` message) over the run-time layers of the
//! [registry](crate::registry), with Caffe's `Init` (upgrades, state
//! rules, split insertion, in-place layers, loss weights, which layers
//! run backward, parameter sharing), forward, backward and reshape,
//! weights from a `.caffemodel` and saved as one.
//!
//! ```
//! use blob_layers::net::{Net, NetState};
//! let mut net = Net::<f32>::from_prototxt(
//!     r#"name: "tiny"
//!        input: "data" input_shape { dim: 1 dim: 4 }
//!        layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
//!                inner_product_param { num_output: 2 weight_filler { type: "constant" value: 1 } } }
//!        layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }"#,
//!     NetState::test(),
//! )?;
//! net.blob("data").unwrap().mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
//! net.forward()?;
//! assert_eq!(net.outputs(), ["prob"]);
//! assert_eq!(net.blob("prob").unwrap().to_vec()?, [0.5, 0.5]);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

mod concat_fold;
mod init;
mod memory;
mod timing;
mod upgrade;
mod upgrade_v0;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use blob_proto::{ParamMessage, TextMessage, schema};
use blob_runtime::{Blob, BlobError, CaffeModel, CopyReport, DeviceBackend, MathElement, Result};

use crate::dyn_layer::{DynLayer, Sharing};
use crate::per_element::compiled;
use crate::registry::LayerRegistry;
use concat_fold::{ConcatInto, concat_offsets, join_unwritten};
pub use init::{NetState, Phase};
pub use memory::MemoryReuse;

/// Caffe's `UpgradeNetAsNeeded`: a `NetParameter` of an old format (V0
/// layers, V1 `layers`, data layers' transformation fields in their data
/// parameters, legacy `input` fields, BatchNorm's statistics specs)
/// rewritten in today's. What `Net` does to every file it reads, and
/// what `blobflow upgrade-net-proto-text` writes out.
///
/// ```
/// use blob_proto::{ParamMessage, TextMessage, schema};
/// let v1 = TextMessage::parse(r#"layers { name: "d" type: DATA top: "x"
///     data_param { source: "db" scale: 0.5 batch_size: 2 } }"#)?;
/// let net = ParamMessage::from_text(&schema::NET_PARAMETER, &v1)?;
/// let new = blob_layers::net::upgrade_net(&net)?;
/// let layer = new.messages("layer").next().unwrap();
/// assert_eq!(layer.string("type"), "Data");
/// assert_eq!(layer.message("transform_param").unwrap().float("scale"), 0.5);
/// assert!(!layer.message("data_param").unwrap().has("scale"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn upgrade_net(net: &ParamMessage) -> Result<ParamMessage> {
    upgrade::upgrade(net)
}
pub use timing::{LayerTime, NetTiming};

/// One layer of a [`Net`]: its name, its run-time layer and its wiring.
struct NetLayer<T: MathElement> {
    name: String,
    param: ParamMessage,
    layer: Box<dyn DynLayer<T>>,
    bottoms: Vec<usize>,
    tops: Vec<usize>,
    bottom_need_backward: Vec<bool>,
    need_backward: bool,
    /// Loss weight of each top (0: not a loss).
    loss_weights: Vec<f64>,
    /// The layers after this one, in place on its only top, that its
    /// pass applies as it writes it: a pass running them all skips
    /// their forward.
    fold: Fold,
    /// For a Concat whose bottoms the layers that write them write into
    /// its top instead (a net that reuses memory): those layers.
    joined_by: Vec<usize>,
    /// Whether the last pass of this layer wrote into a Concat's top
    /// ([`Fold::into`]) rather than its own.
    wrote_into: bool,
    /// The layer this one hands its only top to in channel blocks, in a
    /// net that reuses memory ([`crate::ChannelBlocks`]).
    blocks_to: Option<usize>,
}

/// What a layer's pass applies of the layers after it
/// ([`DynLayer::forward_then_affine`], [`DynLayer::forward_then`],
/// [`DynLayer::forward_then_shortcut`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Fold {
    /// Layers whose [channel map](DynLayer::channel_affine) it folds in
    /// (BatchNorm, Scale), no backward running through them.
    affine: usize,
    /// The Eltwise SUM after them, in a net that reuses memory.
    shortcut: Option<ShortcutFold>,
    /// The activation layer (ReLU, leaky or not, ReLU6) after them (after
    /// the Eltwise, where there is one).
    activation: Option<crate::Activation>,
    /// The Concat, later in the net, whose top the pass writes its
    /// channels of, in a net that reuses memory
    /// ([`DynLayer::forward_into_channels`]).
    into: Option<ConcatInto>,
}

impl Fold {
    /// The layers it covers.
    fn layers(self) -> usize {
        self.affine + usize::from(self.shortcut.is_some()) + usize::from(self.activation.is_some())
    }
}

/// An Eltwise SUM of a layer's only top `t` and an earlier blob, which
/// the layer's pass adds as it writes: it writes the sum's top in place
/// of `t`, which stays unwritten.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ShortcutFold {
    /// The Eltwise's other bottom.
    added: usize,
    /// Whether that is its first bottom.
    first: bool,
    /// The Eltwise's top.
    sum: usize,
}

/// A learnable parameter of a [`Net`] with the settings its `param`
/// spec gives (Caffe's `learnable_params_`, `params_lr_`,
/// `params_weight_decay_`).
#[derive(Clone, Debug, PartialEq)]
pub struct NetParam {
    /// The layer it belongs to.
    pub layer: String,
    /// Its index among the layer's blobs.
    pub index: usize,
    /// The spec's name (shared parameters have one), or the index.
    pub name: String,
    /// Its learning-rate multiplier (`lr_mult`, default 1).
    pub lr_mult: f64,
    /// Its weight-decay multiplier (`decay_mult`, default 1).
    pub decay_mult: f64,
}

/// A parameter blob of a layer that shares another layer's (Caffe's
/// `param_owners_` >= 0): `(layer, blob)` of the sharer and the owner.
#[derive(Clone, Copy, Debug)]
struct Shared {
    sharer: (usize, usize),
    owner: (usize, usize),
}

/// How to build a [`Net`]: the state, the layer registry, and the shapes
/// of inputs the prototxt does not give (a data layer's tops, which the
/// caller fills).
///
/// ```
/// use blob_layers::net::{Net, NetState};
/// let net = Net::<f32>::builder()
///     .state(NetState::train())
///     .input_shape("data", &[8, 3])
///     .input_shape("label", &[8])
///     .from_prototxt(r#"
///         layer { name: "in" type: "Data" top: "data" top: "label" }
///         layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }
///         layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }"#)?;
/// assert_eq!(net.inputs(), ["data", "label"]);
/// assert_eq!(net.blob("loss").unwrap().shape(), [0usize; 0]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub struct NetBuilder<'r, T: MathElement> {
    state: NetState,
    registry: Option<&'r LayerRegistry<T>>,
    shapes: Vec<(String, Vec<usize>)>,
}

impl<'r, T: MathElement> NetBuilder<'r, T> {
    /// The phase, level and stages (TEST, 0, none by default).
    pub fn state(mut self, state: NetState) -> Self {
        self.state = state;
        self
    }

    /// The layer types to build from (the built-in ones by default).
    pub fn registry(mut self, registry: &'r LayerRegistry<T>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The shape of an input blob (a top of an `Input` or data layer),
    /// overriding what the prototxt declares.
    pub fn input_shape(mut self, blob: &str, dims: &[usize]) -> Self {
        self.shapes.push((blob.to_string(), dims.to_vec()));
        self
    }

    /// Builds from a `.prototxt`'s text, read against the registry's
    /// messages (Caffe's and the parameter fields registered with it).
    pub fn from_prototxt(self, text: &str) -> Result<Net<T>> {
        self.with_registry(|b, registry| {
            let tree = TextMessage::parse(text).map_err(text_error("<prototxt>"))?;
            let param = ParamMessage::from_text(registry.schemas().net_parameter(), &tree)
                .map_err(text_error("<prototxt>"))?;
            Net::build(&param, b.state.clone(), registry, &b.shapes)
        })
    }

    /// Builds from a `.prototxt` file; errors name the file.
    pub fn from_file(self, path: impl AsRef<Path>) -> Result<Net<T>> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = blob_runtime::read_text_file(path)?;
        self.with_registry(|b, registry| {
            let tree = TextMessage::parse(&text).map_err(text_error(&shown))?;
            let param = ParamMessage::from_text(registry.schemas().net_parameter(), &tree)
                .map_err(text_error(&shown))?;
            Net::build(&param, b.state.clone(), registry, &b.shapes).map_err(|e| {
                BlobError::InFile {
                    path: shown.clone(),
                    source: Box::new(e),
                }
            })
        })
    }

    /// Builds from a `NetParameter` message (upgraded first, as Caffe
    /// upgrades what it reads from files).
    pub fn from_param(self, param: &ParamMessage) -> Result<Net<T>> {
        self.with_registry(|b, registry| Net::build(param, b.state.clone(), registry, &b.shapes))
    }

    /// Runs `build` with the registry given, or the built-in one.
    fn with_registry<R>(self, build: impl FnOnce(&Self, &LayerRegistry<T>) -> R) -> R {
        match self.registry {
            Some(r) => build(&self, r),
            None => build(&self, &LayerRegistry::with_caffe_layers()),
        }
    }
}

/// Caffe's `Net<Dtype>`. See the [module](self) documentation.
pub struct Net<T: MathElement> {
    name: String,
    phase: Phase,
    layers: Vec<NetLayer<T>>,
    blobs: Vec<Blob<T>>,
    blob_names: Vec<String>,
    blob_index: HashMap<String, usize>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    params: Vec<NetParam>,
    learnable: Vec<(usize, usize)>,
    shared: Vec<Shared>,
    /// What [`Net::reuse_memory`] did, once it has.
    reused: Option<MemoryReuse>,
    /// Which blobs the last layer to write them left in channel blocks.
    in_blocks: Vec<bool>,
}

/// The net's name, phase, inputs, outputs, and each layer with its type
/// and its bottoms' and tops' names and shapes (what `blobflow inspect`
/// prints of a prototxt).
///
/// ```
/// use blob_layers::net::{Net, NetState};
/// let net = Net::<f32>::from_prototxt(
///     "name: 'tiny' input: 'x' input_shape { dim: 2 } layer { name: 'a' type: 'AbsVal' bottom: 'x' top: 'y' }",
///     NetState::test(),
/// )?;
/// let shown = format!("{net:?}");
/// assert!(shown.contains("tiny") && shown.contains("AbsVal") && shown.contains("x: [2]"), "{shown}");
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
impl<T: MathElement> std::fmt::Debug for Net<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let blob = |i: &usize| format!("{}: {:?}", self.blob_names[*i], self.blobs[*i].shape());
        let layers: Vec<String> = self
            .layers
            .iter()
            .map(|l| {
                format!(
                    "{} ({}): {:?} -> {:?}",
                    l.name,
                    l.layer.type_name(),
                    l.bottoms.iter().map(blob).collect::<Vec<_>>(),
                    l.tops.iter().map(blob).collect::<Vec<_>>()
                )
            })
            .collect();
        f.debug_struct("Net")
            .field("name", &self.name)
            .field("phase", &self.phase)
            .field("inputs", &self.inputs.iter().map(blob).collect::<Vec<_>>())
            .field(
                "outputs",
                &self.outputs.iter().map(blob).collect::<Vec<_>>(),
            )
            .field("layers", &layers)
            .finish()
    }
}

fn text_error(at: &str) -> impl FnOnce(blob_proto::ProtoError) -> BlobError + '_ {
    move |source| BlobError::Proto {
        path: at.to_string(),
        source,
    }
}

/// A name from the net's file as a message quotes it: cut at 60
/// characters, control characters escaped (a hostile file's name may be
/// a megabyte long).
fn shown(name: &str) -> String {
    blob_proto::excerpt(name)
}

/// `source`, placed in layer `name` of type `kind`. The names are
/// quoted only here, once a layer has failed: a pass of a small net
/// spent a tenth of its time quoting names it never showed.
fn in_layer(source: BlobError, name: &str, kind: &str) -> BlobError {
    match source {
        // Already placed: do not wrap twice.
        BlobError::Layer { .. } | BlobError::Net { .. } => source,
        other => BlobError::Layer {
            layer: shown(name),
            kind: shown(kind),
            source: Box::new(other),
        },
    }
}

fn net_error(at: impl Into<String>, detail: impl Into<String>) -> BlobError {
    BlobError::Net {
        at: at.into(),
        detail: detail.into(),
    }
}

/// Calls `f` with `blobs[i]` for each index of `at`, gathered on the
/// stack for up to 8 (every layer of the shipped nets): a net of small
/// layers (MTCNN's P-Net at 12 x 12, 11 us a pass) spent a tenth of its
/// pass in `malloc` and `free` for these lists, four a layer.
fn gathered<T: MathElement, R>(
    blobs: &[Blob<T>],
    at: &[usize],
    f: impl FnOnce(&[&Blob<T>]) -> R,
) -> R {
    const ON_STACK: usize = 8;
    match at {
        [] => f(&[]),
        [first, ..] if at.len() <= ON_STACK => {
            let mut refs = [&blobs[*first]; ON_STACK];
            for (r, &i) in refs.iter_mut().zip(at) {
                *r = &blobs[i];
            }
            f(&refs[..at.len()])
        }
        _ => f(&at.iter().map(|&i| &blobs[i]).collect::<Vec<_>>()),
    }
}

/// Calls `f` with a layer's bottoms and tops, each list [`gathered`].
fn with_layer_blobs<T: MathElement, R>(
    blobs: &[Blob<T>],
    (bottoms, tops): (&[usize], &[usize]),
    f: impl FnOnce(&[&Blob<T>], &[&Blob<T>]) -> R,
) -> R {
    gathered(blobs, bottoms, |bottoms| {
        gathered(blobs, tops, |tops| f(bottoms, tops))
    })
}

/// `v[a]` mutably and `v[b]` shared, `a != b`.
fn pair<X>(v: &mut [X], a: usize, b: usize) -> (&mut X, &X) {
    assert_ne!(a, b, "a top never views itself");
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&mut lo[a], &hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&mut hi[0], &lo[b])
    }
}

impl<T: MathElement> Net<T> {
    /// A [`NetBuilder`]: state, registry and input shapes, then the
    /// prototxt.
    pub fn builder() -> NetBuilder<'static, T> {
        NetBuilder {
            state: NetState::test(),
            registry: None,
            shapes: Vec::new(),
        }
    }

    /// Builds a net from a `.prototxt`'s text with the built-in layers
    /// (Caffe's `Net(param_file, phase)`).
    pub fn from_prototxt(text: &str, state: NetState) -> Result<Self> {
        Self::builder().state(state).from_prototxt(text)
    }

    /// Builds a net from a `.prototxt`'s text with the layers of
    /// `registry` (the built-in ones and your own).
    pub fn from_prototxt_with(
        text: &str,
        state: NetState,
        registry: &LayerRegistry<T>,
    ) -> Result<Self> {
        Self::builder()
            .state(state)
            .registry(registry)
            .from_prototxt(text)
    }

    /// Builds a net from a `.prototxt` file with the built-in layers;
    /// errors name the file.
    ///
    /// ```
    /// let err = blob_layers::net::Net::<f32>::from_file("/no/such.prototxt", blob_layers::net::NetState::test())
    ///     .err().unwrap();
    /// assert!(err.to_string().starts_with("/no/such.prototxt: "), "{err}");
    /// ```
    pub fn from_file(path: impl AsRef<Path>, state: NetState) -> Result<Self> {
        Self::builder().state(state).from_file(path)
    }

    /// Builds a net from a `NetParameter` message (upgraded first, as
    /// Caffe upgrades what it reads from files).
    pub fn from_param(
        param: &ParamMessage,
        state: NetState,
        registry: &LayerRegistry<T>,
    ) -> Result<Self> {
        Self::builder()
            .state(state)
            .registry(registry)
            .from_param(param)
    }

    /// [`build_here`](Self::build_here), compiled in this crate (see
    /// `per_element`).
    fn build(
        param: &ParamMessage,
        state: NetState,
        registry: &LayerRegistry<T>,
        shapes: &[(String, Vec<usize>)],
    ) -> Result<Self> {
        (compiled::<T>().build_net)(param, state, registry, shapes)
    }

    /// Caffe's `Net::Init`.
    pub(crate) fn build_here(
        param: &ParamMessage,
        mut state: NetState,
        registry: &LayerRegistry<T>,
        shapes: &[(String, Vec<usize>)],
    ) -> Result<Self> {
        let param = upgrade::upgrade(&with_caller_input_shapes(param, shapes))?;
        if let Some(file_state) = param.message("state") {
            let mut stages: Vec<String> = file_state.strings("stage").map(String::from).collect();
            stages.append(&mut state.stages);
            state.stages = stages;
        }
        let layers = init::insert_splits(init::filter(&param, &state)?)
            .map_err(|e| init::explain_left_out(e, &param, &state))?;
        let mut net = Self {
            name: param.string("name").to_string(),
            phase: state.phase,
            layers: Vec::with_capacity(layers.len()),
            blobs: Vec::new(),
            blob_names: Vec::new(),
            blob_index: HashMap::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            params: Vec::new(),
            learnable: Vec::new(),
            shared: Vec::new(),
            reused: None,
            in_blocks: Vec::new(),
        };
        let mut available: BTreeSet<String> = BTreeSet::new();
        let mut blob_need_backward: Vec<bool> = Vec::new();
        let mut param_owner: HashMap<String, usize> = HashMap::new();
        let mut explicit: Vec<(bool, bool)> = Vec::new();
        for layer_param in layers {
            let at = net.layers.len();
            net.add_layer(
                layer_param,
                registry,
                shapes,
                &mut available,
                &mut blob_need_backward,
            )?;
            net.add_params(at, &mut param_owner, &mut explicit)?;
        }
        net.share_params()?;
        net.mark_backward(param.boolean("force_backward"), &mut blob_need_backward);
        for l in &mut net.layers {
            l.layer.backward_will_run(l.need_backward);
        }
        net.fold_layers();
        net.outputs = available.iter().map(|n| net.blob_index[n]).collect();
        if let Some((name, _)) = shapes
            .iter()
            .find(|(n, _)| !net.inputs().contains(&n.as_str()))
        {
            return Err(net_error(
                format!("net '{}'", shown(&net.name)),
                format!(
                    "a shape is given for '{}', which is not an input (the inputs: {})",
                    shown(name),
                    shown(&net.inputs().join(", "))
                ),
            ));
        }
        Ok(net)
    }

    /// Builds one layer and wires it (Caffe's `AppendBottom`,
    /// `AppendTop`, `SetUp`).
    fn add_layer(
        &mut self,
        param: ParamMessage,
        registry: &LayerRegistry<T>,
        shapes: &[(String, Vec<usize>)],
        available: &mut BTreeSet<String>,
        blob_need_backward: &mut Vec<bool>,
    ) -> Result<()> {
        let name = param.string("name").to_string();
        let kind = param.string("type").to_string();
        let wrap = || |e| in_layer(e, &name, &kind);
        let at = || format!("layer '{}' ({})", shown(&name), shown(&kind));
        let bottom_names: Vec<String> = param.strings("bottom").map(String::from).collect();
        let top_names: Vec<String> = param.strings("top").map(String::from).collect();
        let propagate_down = param.bools("propagate_down");
        if !propagate_down.is_empty() && propagate_down.len() != bottom_names.len() {
            return Err(net_error(
                at(),
                format!(
                    "propagate_down param must be specified either 0 or bottom_size times: {} for {} bottoms",
                    propagate_down.len(),
                    bottom_names.len()
                ),
            ));
        }
        let layer = registry.build(&kind, &param).map_err(wrap())?;
        let (bottoms_ok, tops_ok) = (layer.bottoms(), layer.tops());
        if !bottoms_ok.admits(bottom_names.len()) {
            return Err(net_error(
                at(),
                format!(
                    "{} Layer takes {bottoms_ok} bottom blob(s) as input, not {}",
                    shown(&kind),
                    bottom_names.len()
                ),
            ));
        }
        if !tops_ok.admits(top_names.len()) {
            return Err(net_error(
                at(),
                format!(
                    "{} Layer produces {tops_ok} top blob(s) as output, not {}",
                    shown(&kind),
                    top_names.len()
                ),
            ));
        }
        let mut bottoms = Vec::new();
        let mut bottom_need_backward = Vec::new();
        let mut need_backward = false;
        for (j, b) in bottom_names.iter().enumerate() {
            if !available.remove(b) {
                return Err(net_error(
                    at(),
                    format!(
                        "Unknown bottom blob '{}' (layer '{}', bottom index {j})",
                        shown(b),
                        shown(&name)
                    ),
                ));
            }
            let id = self.blob_index[b];
            let need = propagate_down
                .get(j)
                .copied()
                .unwrap_or(blob_need_backward[id]);
            bottoms.push(id);
            bottom_need_backward.push(need);
            need_backward |= blob_need_backward[id];
        }
        let mut tops = Vec::new();
        for (j, t) in top_names.iter().enumerate() {
            let id = if bottom_names.get(j) == Some(t) {
                if !layer.allows_in_place() {
                    return Err(net_error(
                        at(),
                        format!(
                            "{} Layer does not allow in-place computation (top '{}' is its bottom)",
                            shown(&kind),
                            shown(t)
                        ),
                    ));
                }
                bottoms[j]
            } else if self.blob_index.contains_key(t) {
                return Err(net_error(
                    at(),
                    format!("Top blob '{}' produced by multiple sources.", shown(t)),
                ));
            } else {
                self.blobs.push(Blob::default());
                self.blob_names.push(t.clone());
                blob_need_backward.push(false);
                self.blob_index.insert(t.clone(), self.blobs.len() - 1);
                self.blobs.len() - 1
            };
            available.insert(t.clone());
            tops.push(id);
        }
        if layer.is_input() {
            self.inputs.extend(&tops);
            for (&t, name) in tops.iter().zip(&top_names) {
                if let Some((_, dims)) = shapes.iter().find(|(n, _)| n == name) {
                    self.blobs[t].reshape(dims)?;
                }
            }
        }
        let mut loss_weights = param.floats("loss_weight");
        if loss_weights.is_empty() && layer.is_loss() {
            loss_weights.push(1.0);
        }
        if !loss_weights.is_empty() && loss_weights.len() != tops.len() {
            return Err(net_error(
                at(),
                format!(
                    "loss_weight must be unspecified or specified once per top blob: {} weights for {} tops",
                    loss_weights.len(),
                    tops.len()
                ),
            ));
        }
        loss_weights.resize(tops.len(), 0.0);
        let mut entry = NetLayer {
            name: name.clone(),
            param,
            layer,
            bottoms,
            tops,
            bottom_need_backward,
            need_backward,
            loss_weights,
            fold: Fold::default(),
            joined_by: Vec::new(),
            wrote_into: false,
            blocks_to: None,
        };
        Self::reshape_layer(&mut self.blobs, &mut entry).map_err(wrap())?;
        Self::load_embedded(&mut entry).map_err(wrap())?;
        for (&top, &w) in entry.tops.iter().zip(&entry.loss_weights) {
            if w != 0.0 {
                self.blobs[top].mutable_cpu_diff()?.fill(T::from_f64(w));
            }
        }
        self.layers.push(entry);
        Ok(())
    }

    /// A layer's embedded `blobs` (a `.caffemodel` read as a net, or a
    /// prototxt with `blobs { ... }`) replace its fillers' values.
    fn load_embedded(entry: &mut NetLayer<T>) -> Result<()> {
        let given: Vec<ParamMessage> = entry.param.messages("blobs").cloned().collect();
        if given.is_empty() {
            return Ok(());
        }
        let targets = entry.layer.blobs_mut();
        if given.len() != targets.len() {
            return Err(BlobError::IncompatibleBlobCount {
                layer: entry.name.clone(),
                source_count: given.len(),
                target_count: targets.len(),
            });
        }
        for (param, (proto, target)) in given.iter().zip(targets.iter_mut()).enumerate() {
            let bytes = proto.encode_to_vec();
            let blob_proto: blob_proto::BlobProto = blob_proto::decode_message("BlobProto", &bytes)
                .map_err(|source| BlobError::Proto {
                    path: "<prototxt>".into(),
                    source,
                })?;
            let source = Blob::<T>::from_proto(&blob_proto)?;
            if source.count() != target.count() || source.shape() != target.shape() {
                return Err(BlobError::WeightShapeMismatch {
                    layer: entry.name.clone(),
                    param,
                    source_shape: source.shape_string(),
                    target_shape: target.shape_string(),
                });
            }
            target.copy_from(&source, false)?;
        }
        entry.param.clear("blobs");
        Ok(())
    }

    /// Caffe's `AppendParam` for each of a layer's blobs.
    fn add_params(
        &mut self,
        layer: usize,
        owner_by_name: &mut HashMap<String, usize>,
        explicit: &mut Vec<(bool, bool)>,
    ) -> Result<()> {
        let entry = &self.layers[layer];
        let specs: Vec<ParamMessage> = entry.param.messages("param").cloned().collect();
        let count = entry.layer.blobs().len();
        if specs.len() > count {
            return Err(net_error(
                format!("layer '{}'", shown(&entry.name)),
                format!(
                    "Too many params specified for layer {}: {} param specs for {count} blobs",
                    shown(&entry.name),
                    specs.len()
                ),
            ));
        }
        let mut layer_needs = false;
        for index in 0..count {
            let mut spec = specs
                .get(index)
                .cloned()
                .unwrap_or_else(|| ParamMessage::new(&schema::PARAM_SPEC));
            if !entry.layer.learns_param(index) {
                spec.set("lr_mult", blob_proto::ParamValue::Float(0.0));
                spec.set("decay_mult", blob_proto::ParamValue::Float(0.0));
            }
            let lr_mult = spec.float("lr_mult");
            let decay_mult = spec.float("decay_mult");
            layer_needs |= lr_mult != 0.0;
            let spec_name = spec.string("name").to_string();
            let display = if spec_name.is_empty() {
                index.to_string()
            } else {
                spec_name.clone()
            };
            let owner = (!spec_name.is_empty())
                .then(|| owner_by_name.get(&spec_name).copied())
                .flatten();
            match owner {
                None => {
                    if !spec_name.is_empty() {
                        owner_by_name.insert(spec_name, self.params.len());
                    }
                    self.learnable.push((layer, index));
                    explicit.push((spec.has("lr_mult"), spec.has("decay_mult")));
                    self.params.push(NetParam {
                        layer: self.layers[layer].name.clone(),
                        index,
                        name: display,
                        lr_mult,
                        decay_mult,
                    });
                }
                Some(owner) => {
                    self.check_share(layer, index, owner, &spec)?;
                    let (has_lr, has_decay) = explicit[owner];
                    let owned = &mut self.params[owner];
                    for (has, given, value, slot, what) in [
                        (
                            has_lr,
                            spec.has("lr_mult"),
                            lr_mult,
                            &mut owned.lr_mult,
                            "lr_mult",
                        ),
                        (
                            has_decay,
                            spec.has("decay_mult"),
                            decay_mult,
                            &mut owned.decay_mult,
                            "decay_mult",
                        ),
                    ] {
                        if given && has && *slot != value {
                            return Err(net_error(
                                format!("layer '{}'", shown(&self.layers[layer].name)),
                                format!(
                                    "Shared param '{}' has mismatched {what}.",
                                    shown(&owned.name)
                                ),
                            ));
                        }
                        if given && !has {
                            *slot = value;
                        }
                    }
                    let owner_at = self.learnable[owner];
                    self.shared.push(Shared {
                        sharer: (layer, index),
                        owner: owner_at,
                    });
                }
            }
        }
        self.layers[layer].need_backward |= layer_needs;
        Ok(())
    }

    /// Caffe's STRICT (same shape) or PERMISSIVE (same count) check of a
    /// shared parameter.
    fn check_share(
        &self,
        layer: usize,
        index: usize,
        owner: usize,
        spec: &ParamMessage,
    ) -> Result<()> {
        let (ol, oi) = self.learnable[owner];
        let mine = &self.layers[layer].layer.blobs()[index];
        let theirs = &self.layers[ol].layer.blobs()[oi];
        let permissive = spec.enum_name("share_mode") == "PERMISSIVE";
        let fits = if permissive {
            mine.count() == theirs.count()
        } else {
            mine.shape() == theirs.shape()
        };
        if fits {
            return Ok(());
        }
        Err(net_error(
            format!("layer '{}'", shown(&self.layers[layer].name)),
            format!(
                "Cannot share param '{}' owned by layer '{}' with layer '{}'; {} mismatch. Owner layer param shape is {}; sharing layer shape is {}",
                shown(spec.string("name")),
                shown(&self.layers[ol].name),
                shown(&self.layers[layer].name),
                if permissive { "count" } else { "shape" },
                theirs.shape_string(),
                mine.shape_string()
            ),
        ))
    }

    /// Caffe's `ShareWeights`: each sharer's data and diff become its
    /// owner's.
    fn share_params(&mut self) -> Result<()> {
        for s in self.shared.clone() {
            let owner = &self.layers[s.owner.0].layer.blobs()[s.owner.1];
            let mut alias = Blob::<T>::default();
            alias.reshape(owner.shape())?;
            alias.share_data(owner)?;
            alias.share_diff(owner)?;
            let sharer = &mut self.layers[s.sharer.0].layer.blobs_mut()[s.sharer.1];
            sharer.share_data(&alias)?;
            sharer.share_diff(&alias)?;
        }
        Ok(())
    }

    /// The end of Caffe's `Init`: tops of layers that need backward need
    /// it too; then, from the last layer back, layers that contribute to
    /// no loss (or whose tops need no gradient) skip backward; and
    /// `force_backward` turns every layer back on.
    fn mark_backward(&mut self, force: bool, blob_need_backward: &mut [bool]) {
        // Forward order: a layer needing backward makes its tops need it,
        // and a later reader of those tops needs backward in turn.
        for i in 0..self.layers.len() {
            let l = &mut self.layers[i];
            for (j, &b) in l.bottoms.iter().enumerate() {
                if blob_need_backward[b] && l.param.bools("propagate_down").is_empty() {
                    l.bottom_need_backward[j] = true;
                }
                l.need_backward |= blob_need_backward[b];
            }
            if l.need_backward {
                for &t in &l.tops {
                    blob_need_backward[t] = true;
                }
            }
        }
        let mut under_loss: BTreeSet<String> = BTreeSet::new();
        let mut skip: BTreeSet<String> = BTreeSet::new();
        for l in self.layers.iter_mut().rev() {
            let top_names: Vec<&str> = l.param.strings("top").collect();
            let contributes = l.loss_weights.iter().any(|&w| w != 0.0)
                || top_names.iter().any(|t| under_loss.contains(*t));
            let can_skip = top_names.iter().all(|t| skip.contains(*t));
            if l.need_backward && can_skip {
                l.need_backward = false;
                l.bottom_need_backward.iter_mut().for_each(|b| *b = false);
            }
            if !contributes {
                l.need_backward = false;
            }
            let bottom_names: Vec<String> = l.param.strings("bottom").map(String::from).collect();
            for (j, b) in bottom_names.iter().enumerate() {
                if contributes {
                    under_loss.insert(b.clone());
                } else {
                    l.bottom_need_backward[j] = false;
                }
                if !l.bottom_need_backward[j] {
                    skip.insert(b.clone());
                }
            }
        }
        if force {
            for l in &mut self.layers {
                l.need_backward = true;
                for j in 0..l.bottom_need_backward.len() {
                    l.bottom_need_backward[j] |= l.layer.allow_force_backward(j);
                }
            }
        }
    }

    /// Caffe's `Layer::Reshape` for one layer, and the tops given the
    /// shapes it computes (memory only grows) and the memory it shares.
    fn reshape_layer(blobs: &mut [Blob<T>], entry: &mut NetLayer<T>) -> Result<()> {
        let lists = (entry.bottoms.as_slice(), entry.tops.as_slice());
        let shapes = with_layer_blobs(blobs, lists, |bottoms, tops| {
            entry.layer.reshape(bottoms, tops)
        })?;
        if shapes.len() != entry.tops.len() {
            return Err(BlobError::InvalidParameter {
                op: "reshape",
                detail: format!(
                    "the layer gave {} top shapes for {} tops",
                    shapes.len(),
                    entry.tops.len()
                ),
            });
        }
        for (shape, &t) in shapes.iter().zip(&entry.tops) {
            // A default blob has no axes and no values; dims [] is one.
            let count: usize = shape.dims.iter().product();
            if blobs[t].shape() != shape.dims.as_slice() || blobs[t].count() != count {
                blobs[t].reshape(&shape.dims)?;
            }
            if let Some((b, sharing)) = shape.shares {
                let (top, bottom) = pair(blobs, t, entry.bottoms[b]);
                top.share_data(bottom)?;
                if sharing == Sharing::DataAndDiff {
                    top.share_diff(bottom)?;
                }
            }
        }
        Ok(())
    }

    /// Caffe's `ForwardFromTo(start, end)`: layers `start..=end`, each
    /// reshaped to its inputs first; returns the weighted loss of those
    /// layers, read once they have all run.
    pub fn forward_from_to(&mut self, start: usize, end: usize) -> Result<T> {
        self.run_layers(start, end)?;
        self.loss_of(start, end)
    }

    /// Layers `start..=end` forward, nothing read back.
    fn run_layers(&mut self, start: usize, end: usize) -> Result<()> {
        (compiled::<T>().run_layers)(self, start, end)
    }

    pub(crate) fn run_layers_here(&mut self, start: usize, end: usize) -> Result<()> {
        if start > end || end >= self.layers.len() {
            return Err(net_error(
                format!("net '{}'", shown(&self.name)),
                format!(
                    "cannot run layers {start}..={end} of a net of {} layers",
                    self.layers.len()
                ),
            ));
        }
        // Layers the pass of one before this one has applied.
        let mut covered = 0usize;
        for at in start..=end {
            let skip = covered > 0;
            covered = covered.saturating_sub(1);
            let mut fold = self.layers[at].fold;
            // Only where the layers folded run in this pass too: a pass
            // that stops among them leaves the top as Caffe does. The
            // map is read now, from the values the layers hold.
            let affine = if fold.layers() > 0 && at + fold.layers() <= end {
                self.affine_of(at + 1, fold.affine)
            } else {
                None
            };
            let folding = affine.is_some();
            // A Concat's top this layer writes its channels of, with the
            // Concat's bottoms; or, for a Concat, which of its bottoms'
            // layers wrote into its top when they last ran.
            let into = fold
                .into
                .filter(|_| fold.layers() == 0 || folding)
                .map(|i| (i.top, self.layers[i.concat].bottoms.clone()));
            let joined: Vec<bool> = self.layers[at]
                .joined_by
                .iter()
                .map(|&l| self.layers[l].wrote_into)
                .collect();
            // A top handed on in channel blocks only where the layers in
            // place after it run folded into this pass: they would read
            // it in Caffe's layout.
            self.in_blocks.resize(self.blobs.len(), false);
            let blocks = crate::ChannelBlocks {
                input: matches!(self.layers[at].bottoms.as_slice(), [b] if self.in_blocks[*b]),
                output: self.layers[at].blocks_to.is_some() && (fold.layers() == 0 || folding),
            };
            let (layers, blobs) = (&mut self.layers, &mut self.blobs);
            let entry = &mut layers[at];
            if !skip {
                entry.layer.set_channel_blocks(blocks);
            }
            let mut run = |blobs: &mut [Blob<T>], entry: &mut NetLayer<T>| -> Result<()> {
                Self::reshape_layer(blobs, entry)?;
                if skip {
                    return Ok(());
                }
                entry.wrote_into = false;
                if let Some((top, bottoms)) = &into {
                    let own = entry.tops[0];
                    if let Some(first) = concat_offsets(blobs, bottoms, *top).and_then(|offsets| {
                        bottoms.iter().position(|&b| b == own).map(|i| offsets[i])
                    }) {
                        let map = affine.as_ref().filter(|_| fold.affine > 0);
                        let lists = (entry.bottoms.as_slice(), std::slice::from_ref(top));
                        entry.wrote_into = with_layer_blobs(blobs, lists, |bottoms, into| {
                            entry.layer.forward_into_channels(
                                bottoms,
                                (into[0], first),
                                map,
                                fold.activation,
                            )
                        })?;
                        if entry.wrote_into {
                            return Ok(());
                        }
                    }
                }
                if joined.contains(&true) {
                    return join_unwritten(blobs, entry, &joined);
                }
                if let (Some(shortcut), true) = (fold.shortcut, folding) {
                    // The Eltwise reshapes its top after this layer runs:
                    // until the shapes agree (a pass after the input's
                    // shape changed), the sum runs apart.
                    let top = entry.tops[0];
                    let shape = blobs[top].shape();
                    if blobs[shortcut.sum].shape() == shape
                        && blobs[shortcut.added].shape() == shape
                    {
                        let map = affine.as_ref().filter(|_| fold.affine > 0);
                        let lists = (
                            entry.bottoms.as_slice(),
                            &[shortcut.sum, shortcut.added][..],
                        );
                        return with_layer_blobs(blobs, lists, |bottoms, ends| {
                            let shortcut = crate::Shortcut {
                                blob: ends[1],
                                first: shortcut.first,
                            };
                            entry.layer.forward_then_shortcut(
                                bottoms,
                                ends[0],
                                shortcut,
                                map,
                                fold.activation,
                            )
                        });
                    }
                    fold = Fold {
                        affine: fold.affine,
                        ..Fold::default()
                    };
                }
                let lists = (entry.bottoms.as_slice(), entry.tops.as_slice());
                with_layer_blobs(blobs, lists, |bottoms, tops| match &affine {
                    Some(map) if fold.affine > 0 => {
                        entry
                            .layer
                            .forward_then_affine(bottoms, tops, map, fold.activation)
                    }
                    Some(_) => match fold.activation {
                        Some(activation) => entry.layer.forward_then(bottoms, tops, activation),
                        None => entry.layer.forward(bottoms, tops),
                    },
                    None => entry.layer.forward(bottoms, tops),
                })
            };
            run(blobs, entry).map_err(|e| in_layer(e, &entry.name, entry.layer.type_name()))?;
            if !skip {
                for &t in &entry.tops {
                    self.in_blocks[t] = blocks.output;
                }
            }
            if !skip && folding {
                covered = fold.layers();
            }
        }
        Ok(())
    }

    /// The channel map of layers `first..first + count` one after the
    /// other (an empty map where `count` is 0), or `None` where one has
    /// none now.
    fn affine_of(&self, first: usize, count: usize) -> Option<crate::ChannelAffine> {
        let mut map: Option<crate::ChannelAffine> = None;
        for entry in &self.layers[first..first + count] {
            let next = entry.layer.channel_affine()?;
            map = Some(match map {
                None => next,
                Some(m) => m.then(&next)?,
            });
        }
        Some(map.unwrap_or_default())
    }

    /// Marks what each layer folds of the layers right after it, all in
    /// place on its only top: the BatchNorms and Scales with a
    /// [channel map](DynLayer::channel_affine) where it
    /// [folds](DynLayer::folds_affine) them and no backward pass runs
    /// through them, then an [activation](DynLayer::activation) (ReLU,
    /// leaky or not, ReLU6) where it
    /// [folds](DynLayer::folds_activation) that (whose backward, reading only
    /// the top, runs as before). A Convolution, BatchNorm, Scale and ReLU
    /// of a deploy net become one pass.
    fn fold_layers(&mut self) {
        for at in 0..self.layers.len() {
            let layer = &self.layers[at];
            let fold = if layer.tops.len() == 1 {
                let top = layer.tops.as_slice();
                let on_top = |next: &NetLayer<T>| next.bottoms == top && next.tops == top;
                let mut next = at + 1;
                let mut affine = 0;
                if layer.layer.folds_affine() {
                    while let Some(l) = self.layers.get(next) {
                        if !(on_top(l) && !l.need_backward && l.layer.channel_affine().is_some()) {
                            break;
                        }
                        affine += 1;
                        next += 1;
                    }
                }
                let activation = self
                    .layers
                    .get(next)
                    .filter(|l| layer.layer.folds_activation() && on_top(l))
                    .and_then(|l| l.layer.activation());
                Fold {
                    affine,
                    activation,
                    ..Fold::default()
                }
            } else {
                Fold::default()
            };
            self.layers[at].fold = fold;
            self.layers[at].joined_by.clear();
            self.layers[at].blocks_to = None;
        }
        self.in_blocks.clear();
    }

    /// The layer whose pass applies layer `at`'s forward, where a net
    /// run folds it there; for a Concat whose bottoms' layers write its
    /// top, those layers.
    pub(crate) fn folded_into(&self, at: usize) -> Option<String> {
        let joined_by = &self.layers.get(at)?.joined_by;
        if !joined_by.is_empty() {
            let names: Vec<&str> = joined_by
                .iter()
                .map(|&l| self.layers[l].name.as_str())
                .collect();
            return Some(names.join(", "));
        }
        // The earliest that covers it: a ReLU after an Eltwise that
        // folds it is covered by the Convolution that folds both.
        (1..=at).rev().find_map(|back| {
            let before = &self.layers[at - back];
            (before.fold.layers() >= back).then(|| before.name.clone())
        })
    }

    /// The layers after `at` its pass folds in.
    pub(crate) fn folds_after(&self, at: usize) -> usize {
        self.layers.get(at).map_or(0, |l| l.fold.layers())
    }

    /// The weighted sum of the loss tops of layers `start..=end`.
    fn loss_of(&self, start: usize, end: usize) -> Result<T> {
        let mut loss = T::ZERO;
        for entry in &self.layers[start..=end] {
            for (&top, &w) in entry.tops.iter().zip(&entry.loss_weights) {
                if w != 0.0 {
                    let data = self.blobs[top]
                        .cpu_data()
                        .map_err(|e| in_layer(e, &entry.name, entry.layer.type_name()))?;
                    let sum: T = data.iter().copied().sum();
                    loss += T::from_f64(w) * sum;
                }
            }
        }
        Ok(loss)
    }

    /// Caffe's `Forward`: every layer; returns the weighted loss (0 for
    /// a net without losses). The outputs are then in
    /// [`outputs`](Self::outputs)' blobs.
    pub fn forward(&mut self) -> Result<T> {
        self.forward_unread()?;
        self.loss()
    }

    /// [`forward`](Self::forward) without reading the loss back: on a
    /// GPU the host queues the pass and goes on (to queue the backward
    /// pass and the solver's update) without waiting for the device;
    /// [`loss`](Self::loss) reads it when wanted.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     r#"input: "x" input_shape { dim: 2 dim: 3 }
    ///        input: "label" input_shape { dim: 2 }
    ///        layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" }"#,
    ///     NetState::train(),
    /// )?;
    /// net.forward_unread()?;
    /// net.backward()?;
    /// assert!((net.loss()? - 3f32.ln()).abs() < 1e-6); // uniform over 3 classes
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn forward_unread(&mut self) -> Result<()> {
        if self.layers.is_empty() {
            return Ok(());
        }
        self.run_layers(0, self.layers.len() - 1)
    }

    /// The weighted loss of the last forward pass (each loss top's sum
    /// times its `loss_weight`, as Caffe's `Forward` adds them), read
    /// now: on a GPU this waits for the device.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     r#"input: "x" input_shape { dim: 1 dim: 4 }
    ///        input: "label" input_shape { dim: 1 }
    ///        layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" loss_weight: 2 }"#,
    ///     NetState::train(),
    /// )?;
    /// net.forward_unread()?;
    /// assert!((net.loss()? - 2.0 * 4f32.ln()).abs() < 1e-5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn loss(&self) -> Result<T> {
        if self.layers.is_empty() {
            return Ok(T::ZERO);
        }
        self.loss_of(0, self.layers.len() - 1)
    }

    /// Caffe's `BackwardFromTo(start, end)`: layers `start` down to
    /// `end` that need backward, each told which bottoms need a gradient.
    pub fn backward_from_to(&mut self, start: usize, end: usize) -> Result<()> {
        (compiled::<T>().backward_from_to)(self, start, end)
    }

    pub(crate) fn backward_from_to_here(&mut self, start: usize, end: usize) -> Result<()> {
        if end > start || start >= self.layers.len() {
            return Err(net_error(
                format!("net '{}'", shown(&self.name)),
                format!(
                    "cannot run layers {start} down to {end} of a net of {} layers",
                    self.layers.len()
                ),
            ));
        }
        for entry in self.layers[end..=start].iter_mut().rev() {
            if !entry.need_backward {
                continue;
            }
            let lists = (entry.bottoms.as_slice(), entry.tops.as_slice());
            with_layer_blobs(&self.blobs, lists, |bottoms, tops| {
                let down = &entry.bottom_need_backward;
                entry.layer.backward(tops, down, bottoms)
            })
            .map_err(|e| in_layer(e, &entry.name, entry.layer.type_name()))?;
        }
        Ok(())
    }

    /// Caffe's `Backward`: every layer that needs it, last to first.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// // A deploy net runs no backward unless forced.
    /// let mut net = Net::<f64>::from_prototxt(
    ///     r#"force_backward: true input: "x" input_shape { dim: 1 dim: 2 }
    ///        layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    ///                inner_product_param { num_output: 1 weight_filler { type: "constant" value: 3 } } }"#,
    ///     NetState::test(),
    /// )?;
    /// net.forward()?;
    /// net.blob("y").unwrap().mutable_cpu_diff()?.fill(1.0);
    /// net.backward()?;
    /// assert_eq!(net.blob("x").unwrap().diff_to_vec()?, [3.0, 3.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn backward(&mut self) -> Result<()> {
        if self.layers.is_empty() {
            return Ok(());
        }
        self.backward_from_to(self.layers.len() - 1, 0)
    }

    /// Caffe's `Net::Reshape`: every layer's tops from its bottoms, in
    /// order, without running them (to see the shapes a new input size
    /// gives before a forward pass, which reshapes by itself).
    pub fn reshape(&mut self) -> Result<()> {
        (compiled::<T>().reshape)(self)
    }

    pub(crate) fn reshape_here(&mut self) -> Result<()> {
        for entry in &mut self.layers {
            Self::reshape_layer(&mut self.blobs, entry)
                .map_err(|e| in_layer(e, &entry.name, entry.layer.type_name()))?;
        }
        Ok(())
    }

    /// The net's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The phase it was built for.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// A blob by name (Caffe's `blob_by_name`).
    pub fn blob(&self, name: &str) -> Option<&Blob<T>> {
        self.blob_index.get(name).map(|&i| &self.blobs[i])
    }

    /// A blob by name, to reshape it (an input before a forward pass).
    ///
    /// ```
    /// # let mut net = blob_layers::net::Net::<f32>::from_prototxt(
    /// #     "input: \"x\" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4 \
    /// #      layer { name: \"p\" type: \"Pooling\" bottom: \"x\" top: \"y\" pooling_param { kernel_size: 2 stride: 2 } }",
    /// #     blob_layers::net::NetState::test())?;
    /// net.blob_mut("x").unwrap().reshape(&[1, 1, 8, 6])?;
    /// net.forward()?;
    /// assert_eq!(net.blob("y").unwrap().shape(), [1, 1, 4, 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn blob_mut(&mut self, name: &str) -> Option<&mut Blob<T>> {
        self.blob_index.get(name).map(|&i| &mut self.blobs[i])
    }

    /// Every blob's name once, in creation order (Caffe's `blob_names`).
    pub fn blob_names(&self) -> &[String] {
        &self.blob_names
    }

    /// The layers' names, in order (Caffe's `layer_names`), Splits
    /// included.
    pub fn layer_names(&self) -> impl Iterator<Item = &str> {
        self.layers.iter().map(|l| l.name.as_str())
    }

    /// A layer's type by its name (the first layer of that name).
    pub fn layer_type(&self, name: &str) -> Option<&str> {
        self.layers
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.layer.type_name())
    }

    /// A layer by its name as its own type `L` (Caffe's
    /// `boost::dynamic_pointer_cast<L>(net->layer_by_name(name))`), where
    /// the layer offers itself ([`DynLayer::as_any_mut`]): MemoryData's
    /// `reset` and `add_datum_vector` are reached this way. `None` where
    /// no layer has the name or it is not an `L`.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     "input: 'x' input_shape { dim: 2 } layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' }",
    ///     NetState::test(),
    /// )?;
    /// assert!(net.layer_mut::<String>("r").is_none());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn layer_mut<L: 'static>(&mut self, name: &str) -> Option<&mut L> {
        self.layers
            .iter_mut()
            .find(|l| l.name == name)?
            .layer
            .as_any_mut()?
            .downcast_mut::<L>()
    }

    /// A layer's `LayerParameter` by its name (the first layer of that
    /// name; Caffe's `layer_by_name(name)->layer_param()`), as the net
    /// read it: upgraded, its defaults filled.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let net = Net::<f32>::from_prototxt(
    ///     "input: 'x' input_shape { dim: 2 } layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' relu_param { negative_slope: 0.5 } }",
    ///     NetState::test(),
    /// )?;
    /// let relu = net.layer_param("r").unwrap().message("relu_param").unwrap();
    /// assert_eq!(relu.float("negative_slope"), 0.5);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn layer_param(&self, name: &str) -> Option<&ParamMessage> {
        self.layers
            .iter()
            .find(|l| l.name == name)
            .map(|l| &l.param)
    }

    /// A layer's parameter blobs by its name (the first layer of that
    /// name, as Caffe's weight copy finds it).
    pub fn layer_blobs(&self, name: &str) -> Option<&[Blob<T>]> {
        self.layers
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.layer.blobs())
    }

    /// A layer's bottom blobs' names by its name (Caffe's
    /// `bottom_names(layer_id)`), in the order the layer reads them.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let net = Net::<f32>::from_prototxt(
    ///     r#"input: "x" input_shape { dim: 1 dim: 3 }
    ///        layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 } }"#,
    ///     NetState::test(),
    /// )?;
    /// assert_eq!(net.layer_bottoms("ip"), Some(vec!["x"]));
    /// assert_eq!(net.layer_tops("ip"), Some(vec!["y"]));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn layer_bottoms(&self, name: &str) -> Option<Vec<&str>> {
        let layer = self.layers.iter().find(|l| l.name == name)?;
        Some(
            layer
                .bottoms
                .iter()
                .map(|&b| self.blob_names[b].as_str())
                .collect(),
        )
    }

    /// A layer's top blobs' names by its name (Caffe's `top_names`).
    pub fn layer_tops(&self, name: &str) -> Option<Vec<&str>> {
        let layer = self.layers.iter().find(|l| l.name == name)?;
        Some(
            layer
                .tops
                .iter()
                .map(|&t| self.blob_names[t].as_str())
                .collect(),
        )
    }

    /// The input blobs' names: the tops of `Input` (and data) layers, in
    /// layer order (Caffe's `input_blob_names` with `Input` layers).
    pub fn inputs(&self) -> Vec<&str> {
        self.inputs
            .iter()
            .map(|&i| self.blob_names[i].as_str())
            .collect()
    }

    /// The output blobs' names: blobs no layer reads, ordered by name as
    /// Caffe orders them.
    pub fn outputs(&self) -> Vec<&str> {
        self.outputs
            .iter()
            .map(|&i| self.blob_names[i].as_str())
            .collect()
    }

    /// The loss weight of blob `name` (Caffe's `blob_loss_weights`): what
    /// its layer's `loss_weight` gives it, 1 for a loss layer's first top
    /// by default, 0 for a blob that is no loss; `None` for no such blob.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let net = Net::<f32>::from_prototxt(r#"
    ///     input: "x" input_shape { dim: 2 dim: 3 } input: "y" input_shape { dim: 2 }
    ///     layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "y" top: "loss" }"#,
    ///     NetState::train())?;
    /// assert_eq!(net.blob_loss_weight("loss"), Some(1.0));
    /// assert_eq!(net.blob_loss_weight("x"), Some(0.0));
    /// assert_eq!(net.blob_loss_weight("z"), None);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn blob_loss_weight(&self, name: &str) -> Option<f64> {
        let index = self.blob_names.iter().position(|n| n == name)?;
        let weight = self
            .layers
            .iter()
            .flat_map(|l| l.tops.iter().zip(&l.loss_weights))
            .filter(|(top, _)| **top == index)
            .map(|(_, &w)| w)
            .next_back();
        Some(weight.unwrap_or(0.0))
    }

    /// The learnable parameters with their `lr_mult` and `decay_mult`
    /// (shared ones once, under their owner).
    pub fn params(&self) -> &[NetParam] {
        &self.params
    }

    /// The learnable parameter blobs, in [`params`](Self::params)' order
    /// (Caffe's `learnable_params`).
    pub fn param_blobs(&self) -> Vec<&Blob<T>> {
        self.learnable
            .iter()
            .map(|&(l, i)| &self.layers[l].layer.blobs()[i])
            .collect()
    }

    /// The learnable parameters' `lr_mult` and `decay_mult` as the
    /// solvers take them, in [`param_blobs`](Self::param_blobs)' order.
    ///
    /// ```
    /// # let mut net = blob_layers::net::Net::<f32>::from_prototxt(
    /// #     "input: \"x\" input_shape { dim: 1 dim: 2 } layer { name: \"ip\" type: \"InnerProduct\" bottom: \"x\" top: \"y\" \
    /// #      param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 } inner_product_param { num_output: 1 } }",
    /// #     blob_layers::net::NetState::train())?;
    /// let specs = net.param_specs();
    /// assert_eq!((specs[1].lr_mult, specs[1].decay_mult), (2.0, 0.0));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn param_specs(&self) -> Vec<crate::solver::ParamSpec> {
        self.params
            .iter()
            .map(|p| crate::solver::ParamSpec {
                lr_mult: p.lr_mult as f32,
                decay_mult: p.decay_mult as f32,
            })
            .collect()
    }

    /// Tells every layer the training iteration and the one training
    /// goes to (the YOLO fork's `Net::set_iter`, which its solver calls
    /// before each iteration's passes; the solvers here do too).
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::builder().state(NetState::train()).from_prototxt(
    ///     r#"input: "x" input_shape { dim: 1 } layer { name: "r" type: "ReLU" bottom: "x" top: "y" }"#)?;
    /// net.set_iteration(10, 100);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn set_iteration(&mut self, iter: usize, max_iter: usize) {
        for l in &mut self.layers {
            l.layer.set_iteration(iter, max_iter);
        }
    }

    /// Caffe's `ClearParamDiffs`: every learnable parameter's gradient
    /// zeroed (layers add theirs to it in backward), on the device it
    /// lives on.
    pub fn clear_param_diffs(&self) -> Result<()> {
        for p in self.param_blobs() {
            p.clear_diff()?;
        }
        Ok(())
    }

    /// Whether a layer runs in the backward pass (Caffe's
    /// `layer_need_backward`), by name.
    pub fn layer_needs_backward(&self, name: &str) -> Option<bool> {
        self.layers
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.need_backward)
    }

    /// The bytes of memory the blobs hold (data and diff capacity): what
    /// a reshape to a smaller input leaves unchanged.
    pub fn memory_bytes(&self) -> usize {
        let blob_bytes = |b: &Blob<T>| b.capacity() * size_of::<T>();
        self.blobs.iter().map(blob_bytes).sum::<usize>()
            + self
                .layers
                .iter()
                .flat_map(|l| l.layer.blobs())
                .map(blob_bytes)
                .sum::<usize>()
    }

    /// Caffe's `CopyTrainedLayersFrom`: each layer of the model gives its
    /// blobs to this net's first layer of the same name (counts and
    /// shapes checked, legacy 4-D shapes right-aligned); layers with no
    /// match are ignored, as the report says (its `missing` lists this
    /// net's layers with parameters that the model did not fill).
    pub fn copy_from(&mut self, model: &CaffeModel) -> Result<CopyReport> {
        let mut targets: Vec<(&str, &mut [Blob<T>])> = self
            .layers
            .iter_mut()
            .filter(|l| !l.layer.blobs().is_empty())
            .map(|l| (l.name.as_str(), l.layer.blobs_mut()))
            .collect();
        let report = model.copy_trained_layers_into(&mut targets)?;
        self.share_params()?;
        Ok(report)
    }

    /// Caffe's `ShareTrainedLayersWith`: each layer of this net takes the
    /// parameter data (not the gradients) of `other`'s first layer of the
    /// same name, as a test net shares its train net's weights; counts
    /// and shapes must match.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let text = r#"input: "x" input_shape { dim: 1 dim: 2 }
    ///     layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 1 } }"#;
    /// let train = Net::<f32>::from_prototxt(text, NetState::train())?;
    /// let mut test = Net::<f32>::from_prototxt(text, NetState::test())?;
    /// test.share_weights_with(&train)?;
    /// train.layer_blobs("ip").unwrap()[0].mutable_cpu_data()?.fill(0.5);
    /// assert_eq!(test.layer_blobs("ip").unwrap()[0].to_vec()?, [0.5, 0.5]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn share_weights_with(&mut self, other: &Net<T>) -> Result<()> {
        for l in &mut self.layers {
            let Some(src) = other.layers.iter().find(|o| o.name == l.name) else {
                continue;
            };
            let theirs = src.layer.blobs();
            let mine = l.layer.blobs_mut();
            if mine.len() != theirs.len() {
                return Err(BlobError::IncompatibleBlobCount {
                    layer: l.name.clone(),
                    source_count: theirs.len(),
                    target_count: mine.len(),
                });
            }
            for (param, (m, t)) in mine.iter_mut().zip(theirs).enumerate() {
                if m.shape() != t.shape() {
                    return Err(BlobError::WeightShapeMismatch {
                        layer: l.name.clone(),
                        param,
                        source_shape: t.shape_string(),
                        target_shape: m.shape_string(),
                    });
                }
                m.share_data(t)?;
            }
        }
        Ok(())
    }

    /// Caffe's `ToProto` then `WriteProtoToBinaryFile`: a `.caffemodel`
    /// Caffe reads, each layer as built (phase, Splits, loss weights)
    /// with its blobs' data.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let text = r#"input: "x" input_shape { dim: 1 dim: 2 }
    ///     layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 1 } }"#;
    /// let net = Net::<f32>::from_prototxt(text, NetState::test())?;
    /// net.layer_blobs("ip").unwrap()[0].mutable_cpu_data()?.fill(2.0);
    /// let model = net.to_model()?; // model.save("net.caffemodel") writes it
    /// let mut other = Net::<f32>::from_prototxt(text, NetState::test())?;
    /// assert_eq!(other.copy_from(&model)?.copied, ["ip"]);
    /// assert_eq!(other.layer_blobs("ip").unwrap()[0].to_vec()?, [2.0, 2.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_model(&self) -> Result<CaffeModel> {
        use blob_proto::Message;
        let mut bytes = Vec::new();
        let put = |field: u32, body: &[u8], out: &mut Vec<u8>| {
            // Key (wire type 2, length-delimited), then the length.
            let mut varint = |mut v: u64| {
                while v >= 0x80 {
                    out.push((v as u8) | 0x80);
                    v >>= 7;
                }
                out.push(v as u8);
            };
            varint(u64::from(field) << 3 | 2);
            varint(body.len() as u64);
            out.extend_from_slice(body);
        };
        put(1, self.name.as_bytes(), &mut bytes);
        for l in &self.layers {
            let mut layer = l.param.encode_to_vec();
            for blob in l.layer.blobs() {
                let proto = blob.to_proto(false)?;
                put(7, &proto.encode_to_vec(), &mut layer);
            }
            put(100, &layer, &mut bytes);
        }
        CaffeModel::from_bytes(&bytes)
    }

    /// Lets every convolution of the net run f32 on TF32 tensor cores
    /// where cuDNN convolves it on a GPU ([`DynLayer::allow_tf32`]): about
    /// 1e-3 relative off f32, as Caffe and PyTorch compute by default. Off
    /// unless set; it changes nothing on the CPU.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     r#"input: "x" input_shape { dim: 1 dim: 1 dim: 3 dim: 3 }
    ///        layer { name: "c" type: "Convolution" bottom: "x" top: "y"
    ///                convolution_param { num_output: 1 kernel_size: 3 } }"#,
    ///     NetState::test(),
    /// )?;
    /// net.allow_tf32(true);
    /// net.forward()?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn allow_tf32(&mut self, allowed: bool) {
        for l in &mut self.layers {
            l.layer.allow_tf32(allowed);
        }
    }

    /// Puts every blob and parameter on `device` (Caffe's
    /// `Caffe::set_mode(GPU)` for this net): the layers then run there.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// // On a GPU: `blob_runtime::cuda::CudaBackend::new(0)?` (feature `cuda`).
    /// let device = blob_runtime::host_device::HostDevice::new();
    /// let mut net = Net::<f32>::from_prototxt(
    ///     r#"input: "x" input_shape { dim: 1 dim: 3 } layer { name: "s" type: "Softmax" bottom: "x" top: "p" }"#,
    ///     NetState::test(),
    /// )?;
    /// net.to_device(device)?;
    /// assert!(net.blob("p").unwrap().device().is_some());
    /// net.forward()?;
    /// assert_eq!(net.blob("p").unwrap().to_vec()?, [1.0 / 3.0; 3]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_device(&mut self, device: Arc<dyn DeviceBackend>) -> Result<()> {
        // Each blob moves to memory of its own: any reuse is undone, and
        // with it the shortcuts folded, which leave blobs unwritten.
        self.reused = None;
        self.fold_layers();
        for b in &mut self.blobs {
            b.move_to(device.clone())?;
        }
        for l in &mut self.layers {
            for b in l.layer.blobs_mut() {
                b.move_to(device.clone())?;
            }
        }
        self.share_params()?;
        self.reshape()
    }
}

/// A legacy `input: "x"` without `input_shape` or `input_dim` (which
/// Caffe's upgrade drops, as old model files list them so) is kept when
/// the caller gives every such input's shape, as OpenCV's importer
/// keeps them: the net is built at the caller's shapes.
fn with_caller_input_shapes<'p>(
    param: &'p ParamMessage,
    shapes: &[(String, Vec<usize>)],
) -> std::borrow::Cow<'p, ParamMessage> {
    let shape_of = |name: &str| shapes.iter().find(|(n, _)| n == name).map(|(_, s)| s);
    let named: Vec<&str> = param.strings("input").collect();
    let shapeless = param.messages("input_shape").next().is_none() && !param.has("input_dim");
    if named.is_empty() || !shapeless || !named.iter().all(|n| shape_of(n).is_some()) {
        return std::borrow::Cow::Borrowed(param);
    }
    let mut given = param.clone();
    for name in named {
        let mut shape = ParamMessage::new(&schema::BLOB_SHAPE);
        for &d in shape_of(name).into_iter().flatten() {
            shape.set("dim", blob_proto::ParamValue::Int(d as i64));
        }
        given.set("input_shape", blob_proto::ParamValue::Message(shape));
    }
    std::borrow::Cow::Owned(given)
}
