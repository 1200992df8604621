//! Caffe's layer registry (`LayerRegistry`, `REGISTER_LAYER_CLASS`): a
//! layer type's name to the function that builds it from its
//! `LayerParameter`. The built-in layers are registered by
//! [`LayerRegistry::with_caffe_layers`]; users add their own types.

use std::collections::BTreeMap;
use std::sync::Arc;

use blob_proto::schema::{FieldSchema, MessageSchema};
use blob_proto::{ParamMessage, Schemas, TextMessage};
use blob_runtime::{BlobError, MathElement};

use crate::dyn_layer::DynLayer;
use crate::layer::Result;
use crate::typed_layer::{Candidate, CandidateSet, TypedLayer};

/// Builds a layer from its `LayerParameter` (its `phase` already set).
pub type LayerBuilder<T> = Arc<dyn Fn(&ParamMessage) -> Result<Box<dyn DynLayer<T>>> + Send + Sync>;

/// Layer types by name (Caffe's `LayerRegistry<Dtype>`).
///
/// ```
/// let registry = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers();
/// assert!(registry.knows("Convolution"));
/// let param = blob_proto::ParamMessage::new(&blob_proto::schema::LAYER_PARAMETER);
/// let err = registry.build("Convolutoin", &param).err().unwrap().to_string();
/// assert!(err.contains("Unknown layer type: Convolutoin (nearest known: Convolution, "), "{err}");
/// ```
pub struct LayerRegistry<T: MathElement> {
    builders: BTreeMap<String, LayerBuilder<T>>,
    schemas: Schemas,
    /// The typed layers registered under each type name.
    typed: BTreeMap<String, CandidateSet<T>>,
}

/// A registry to extend without changing the original (a typed net adds
/// its own layers to the one it is built with).
impl<T: MathElement> Clone for LayerRegistry<T> {
    fn clone(&self) -> Self {
        Self {
            builders: self.builders.clone(),
            schemas: self.schemas.clone(),
            typed: self.typed.clone(),
        }
    }
}

/// The registered type names.
///
/// ```
/// let registry = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers();
/// assert!(format!("{registry:?}").contains("\"Convolution\""));
/// ```
impl<T: MathElement> std::fmt::Debug for LayerRegistry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerRegistry")
            .field("types", &self.type_names().collect::<Vec<_>>())
            .field(
                "parameters",
                &self
                    .schemas
                    .extensions()
                    .iter()
                    .map(|e| format!("{}.{}", e.message.name, e.field.name))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<T: MathElement> LayerRegistry<T> {
    /// A registry with no types.
    pub fn empty() -> Self {
        Self {
            builders: BTreeMap::new(),
            schemas: Schemas::caffe(),
            typed: BTreeMap::new(),
        }
    }

    /// The layers blobflow implements, under Caffe's type names.
    pub fn with_caffe_layers() -> Self {
        let mut r = Self::empty();
        (crate::per_element::compiled::<T>().register_caffe_layers)(&mut r);
        r
    }

    /// Builds `fork`'s forms of Caffe's layer types in place of Caffe's
    /// own (see [`Fork`](crate::Fork)): for nets written for that fork.
    ///
    /// ```
    /// use blob_layers::Fork;
    /// use blob_layers::net::{Net, NetState};
    /// use blob_layers::registry::LayerRegistry;
    /// let text = "input: 'x' input_shape { dim: 1 dim: 1 dim: 13 dim: 13 }
    ///     layer { name: 'p' type: 'Pooling' bottom: 'x' top: 'p'
    ///             pooling_param { pool: MAX kernel_size: 2 stride: 1 } }";
    /// let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    /// let caffe = Net::builder().registry(&registry).from_prototxt(text)?;
    /// assert_eq!(caffe.blob("p").unwrap().shape(), [1, 1, 12, 12]);
    /// registry.use_fork(Fork::CaffeYolov3);
    /// let fork = Net::builder().registry(&registry).from_prototxt(text)?;
    /// assert_eq!(fork.blob("p").unwrap().shape(), [1, 1, 13, 13]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn use_fork(&mut self, fork: crate::Fork) {
        crate::fork_layers::use_fork(self, fork);
    }

    /// Adds (or replaces) a layer type.
    pub fn register(
        &mut self,
        type_name: &str,
        builder: impl Fn(&ParamMessage) -> Result<Box<dyn DynLayer<T>>> + Send + Sync + 'static,
    ) {
        self.builders
            .insert(type_name.to_string(), Arc::new(builder));
        self.typed.remove(type_name);
    }

    /// Adds a [`TypedLayer`] under its Caffe type name
    /// ([`TypedLayer::TYPE`]), with its parameter message
    /// ([`TypedLayer::PARAM_FIELD`]) when it has one: one call, from the
    /// layer's own declaration. Instances of one layer at several shapes
    /// (`Gain<16>` and `Gain<32>`, both `"Gain"`) may all be registered:
    /// each layer of that type in a net becomes the instance whose
    /// bottom shapes its bottoms have.
    ///
    /// ```
    /// # use blob_layers::typed_layer::TypedLayer;
    /// # use blob_runtime::{Result, typed::{D, Dyn, TypedBlob}};
    /// # struct Gain<const C: usize>;
    /// # impl<const C: usize> TypedLayer<f32> for Gain<C> {
    /// #     const TYPE: &'static str = "Gain";
    /// #     type Bottoms = ((Dyn, D<C>),);
    /// #     type Tops = ((Dyn, D<C>),);
    /// #     type Params = ((D<C>,),);
    /// #     fn from_param(_: &blob_proto::ParamMessage) -> Result<Self> { Ok(Gain) }
    /// #     fn forward(&mut self, _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: (&TypedBlob<f32, (D<C>,)>,)) -> Result<()> { Ok(()) }
    /// #     fn backward(&mut self, _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: &[bool], _: (&TypedBlob<f32, (Dyn, D<C>)>,), _: (&TypedBlob<f32, (D<C>,)>,)) -> Result<()> { Ok(()) }
    /// # }
    /// use blob_layers::net::Net;
    /// use blob_layers::registry::LayerRegistry;
    /// let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    /// registry.register_typed::<Gain<3>>()?;
    /// registry.register_typed::<Gain<5>>()?;
    /// let net = Net::<f32>::builder().registry(&registry).from_prototxt(
    ///     "input: 'a' input_shape { dim: 2 dim: 3 } input: 'b' input_shape { dim: 2 dim: 5 }
    ///      layer { name: 'ga' type: 'Gain' bottom: 'a' top: 'ya' }
    ///      layer { name: 'gb' type: 'Gain' bottom: 'b' top: 'yb' }",
    /// )?;
    /// assert_eq!(net.layer_blobs("ga").unwrap()[0].shape(), &[3]);
    /// assert_eq!(net.layer_blobs("gb").unwrap()[0].shape(), &[5]);
    /// let err = Net::<f32>::builder().registry(&registry).from_prototxt(
    ///     "input: 'c' input_shape { dim: 2 dim: 4 } layer { name: 'gc' type: 'Gain' bottom: 'c' top: 'yc' }",
    /// ).err().unwrap().to_string();
    /// assert!(err.contains("no registered Gain takes bottoms of shape 2 4 (8): Gain<3> takes (_ 3); Gain<5> takes (_ 5)"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn register_typed<L: TypedLayer<T>>(&mut self) -> Result<()> {
        if let Some(field) = L::PARAM_FIELD {
            self.register_param_field(&blob_proto::schema::LAYER_PARAMETER, field)?;
        }
        self.add_candidate(L::TYPE, Candidate::of::<L>());
        Ok(())
    }

    /// Adds an instance of a typed layer to its type's set, and the set
    /// as the type's builder.
    pub(crate) fn add_candidate(&mut self, type_name: &str, candidate: Candidate<T>) {
        let mut set = self
            .typed
            .remove(type_name)
            .unwrap_or_else(CandidateSet::new);
        set.add(candidate);
        let builder = set.clone();
        self.register(type_name, move |param| builder.build(param));
        self.typed.insert(type_name.to_string(), set);
    }

    /// Adds a layer type that takes a parameter message of its own (a
    /// field of `LayerParameter` that `caffe.proto` lacks, as a fork's
    /// `caffe.proto` adds it), so `layer { type: "Gain" gain_param { ... } }`
    /// reads from a `.prototxt`, round-trips through a `.caffemodel`'s
    /// bytes and reaches the builder with its defaults.
    ///
    /// ```
    /// use blob_layers::registry::LayerRegistry;
    /// use blob_layers::net::{Net, NetState};
    /// use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
    ///
    /// static GAIN: MessageSchema = MessageSchema {
    ///     name: "GainParameter",
    ///     fields: &[FieldSchema::optional("gain", 1, FieldKind::Float).with_default(FieldDefault::Float(1.0))],
    /// };
    /// let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    /// registry.register_with_param(
    ///     "Gain",
    ///     FieldSchema::optional("gain_param", 5001, FieldKind::Message(&GAIN)),
    ///     |layer| {
    ///         let gain = layer.message("gain_param").map_or(1.0, |p| p.float("gain"));
    ///         // A Power layer of scale `gain` stands in for the user's own layer here.
    ///         let power = format!("type: 'Power' power_param {{ scale: {gain} }}");
    ///         LayerRegistry::<f32>::with_caffe_layers().build_text(&power)
    ///     },
    /// )?;
    /// let mut net = Net::<f32>::builder().registry(&registry).from_prototxt(
    ///     "input: 'x' input_shape { dim: 2 }
    ///      layer { name: 'g' type: 'Gain' bottom: 'x' top: 'y' gain_param { gain: 3 } }",
    /// )?;
    /// net.blob("x").unwrap().mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0]);
    /// net.forward()?;
    /// assert_eq!(net.blob("y").unwrap().to_vec()?, [3.0, 6.0]);
    ///
    /// // A misspelt field still names its line and column.
    /// let err = Net::<f32>::builder().registry(&registry)
    ///     .from_prototxt("layer { name: 'g' type: 'Gain'\n gain_param { gian: 3 } }").err().unwrap();
    /// assert!(err.to_string().contains("line 2, column 15: GainParameter has no field named gian"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn register_with_param(
        &mut self,
        type_name: &str,
        param: FieldSchema,
        builder: impl Fn(&ParamMessage) -> Result<Box<dyn DynLayer<T>>> + Send + Sync + 'static,
    ) -> Result<()> {
        self.register_param_field(&blob_proto::schema::LAYER_PARAMETER, param)?;
        self.register(type_name, builder);
        Ok(())
    }

    /// Adds a field to one of Caffe's messages (a fork's `ceil_mode` in
    /// `PoolingParameter`, a user's parameter message in
    /// `LayerParameter`): every net read with this registry knows it.
    /// A name or number the message already uses for another field is
    /// refused.
    pub fn register_param_field(
        &mut self,
        message: &'static MessageSchema,
        field: FieldSchema,
    ) -> Result<()> {
        self.schemas
            .extend(message, field)
            .map_err(|source| BlobError::Proto {
                path: "<layer registry>".into(),
                source,
            })
    }

    /// The messages nets are read against: `caffe.proto` and the fields
    /// registered here.
    pub fn schemas(&self) -> &Schemas {
        &self.schemas
    }

    /// Whether a type is registered.
    pub fn knows(&self, type_name: &str) -> bool {
        self.builders.contains_key(type_name)
    }

    /// The three registered types nearest `name` in spelling (case
    /// aside), nearest first: what a typo most likely meant.
    fn nearest(&self, name: &str) -> Vec<&str> {
        let name: Vec<char> = name.to_lowercase().chars().take(64).collect();
        let mut scored: Vec<(usize, &str)> = self
            .type_names()
            .map(|t| {
                (
                    edit_distance(&name, &t.to_lowercase().chars().collect::<Vec<_>>()),
                    t,
                )
            })
            .collect();
        scored.sort();
        scored.into_iter().take(3).map(|(_, t)| t).collect()
    }

    /// The registered type names, sorted.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.builders.keys().map(String::as_str)
    }

    /// Builds a layer of `type_name` from its parameter (Caffe's
    /// `CreateLayer`); an unknown type is an error that lists the known
    /// ones.
    pub fn build(&self, type_name: &str, param: &ParamMessage) -> Result<Box<dyn DynLayer<T>>> {
        match self.builders.get(type_name) {
            Some(build) => build(param),
            None => Err(BlobError::Net {
                at: match param.line_of("type") {
                    0 => format!("layer '{}'", blob_proto::excerpt(param.string("name"))),
                    line => format!(
                        "line {line}, layer '{}'",
                        blob_proto::excerpt(param.string("name"))
                    ),
                },
                detail: format!(
                    "Unknown layer type: {} (nearest known: {}; {} types known). A type of \
                     your own is added with LayerRegistry::register (its parameters with \
                     register_with_param) and built with NetBuilder::registry",
                    blob_proto::excerpt(type_name),
                    self.nearest(type_name).join(", "),
                    self.builders.len()
                ),
            }),
        }
    }
}

impl<T: MathElement> LayerRegistry<T> {
    /// Builds one layer from its `LayerParameter` in Caffe's text format,
    /// of the type its `type` field names: a layer on its own, to run or
    /// test without a net (with [`GradientChecker`](crate::check), say).
    /// Its phase is TRAIN unless the text sets `phase: TEST`.
    ///
    /// ```
    /// use blob_layers::registry::LayerRegistry;
    /// use blob_runtime::Blob;
    /// let mut relu = LayerRegistry::<f32>::with_caffe_layers().build_text(r#"type: "ReLU""#)?;
    /// let x = Blob::from_vec(&[3], vec![-1.0, 0.5, 2.0])?;
    /// let y = Blob::new(&[3])?;
    /// relu.forward(&[&x], &[&y])?;
    /// assert_eq!(y.to_vec()?, [0.0, 0.5, 2.0]);
    /// let err = LayerRegistry::<f32>::with_caffe_layers().build_text("type: ReLU").err().unwrap();
    /// assert!(err.to_string().contains("line 1"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn build_text(&self, text: &str) -> Result<Box<dyn DynLayer<T>>> {
        let in_text = |source| BlobError::Proto {
            path: "<layer text>".into(),
            source,
        };
        let tree = TextMessage::parse(text).map_err(in_text)?;
        let param =
            ParamMessage::from_text(self.schemas.layer_parameter(), &tree).map_err(in_text)?;
        self.build(param.string("type"), &param)
    }
}

impl<T: MathElement> Default for LayerRegistry<T> {
    fn default() -> Self {
        Self::with_caffe_layers()
    }
}

/// Levenshtein's distance between two spellings.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}
