//! Caffe's `caffe.proto` as a table: each message's fields with their
//! numbers, types and defaults, for reading a `.prototxt` or a layer's
//! bytes into a [`ParamMessage`](crate::ParamMessage) that answers by
//! field name. Field numbers follow BVLC Caffe (and, for Permute,
//! PriorBox, DetectionOutput, DetectionEvaluate, MultiBoxLoss, AnnotatedData, the SSD fork's
//! transform_param fields and Normalize, the SSD fork's numbering).

/// Whether a field holds one value or a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    /// `optional` (or `required`): the last value given wins.
    Optional,
    /// `repeated`: every value, in order.
    Repeated,
}

/// The type of a field's values.
#[derive(Clone, Copy, Debug)]
pub enum FieldKind {
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `bool`.
    Bool,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// An enum, with its value names.
    Enum(&'static EnumSchema),
    /// A nested message.
    Message(&'static MessageSchema),
}

/// A field's default when it is absent (`[default = ...]` in
/// `caffe.proto`; protobuf's zero values otherwise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldDefault {
    /// Protobuf's zero value of the type.
    Zero,
    /// An integer or enum value.
    Int(i64),
    /// A floating-point value.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(&'static str),
}

/// One field of a message.
#[derive(Clone, Copy, Debug)]
pub struct FieldSchema {
    /// Its name in `caffe.proto` (and in text format).
    pub name: &'static str,
    /// Its field number.
    pub number: u32,
    /// One value or a list.
    pub label: Label,
    /// The values' type.
    pub kind: FieldKind,
    /// The value read when the field is absent.
    pub default: FieldDefault,
}

/// One message of `caffe.proto`.
///
/// ```
/// let layer = &blob_proto::schema::LAYER_PARAMETER;
/// assert_eq!(layer.field("convolution_param").unwrap().number, 106);
/// assert!(layer.field("nmae").is_none());
/// ```
#[derive(Debug)]
pub struct MessageSchema {
    /// Its name, e.g. `LayerParameter`.
    pub name: &'static str,
    /// Its fields.
    pub fields: &'static [FieldSchema],
}

impl FieldSchema {
    /// An `optional` field at protobuf's zero default: what a fork's
    /// or a user's parameter message declares, for
    /// [`Schemas::extend`](crate::Schemas::extend).
    ///
    /// ```
    /// use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema};
    /// let f = FieldSchema::optional("zoom_factor", 3, FieldKind::Int32).with_default(FieldDefault::Int(1));
    /// assert_eq!(f.default, FieldDefault::Int(1));
    /// ```
    pub const fn optional(name: &'static str, number: u32, kind: FieldKind) -> Self {
        Self {
            name,
            number,
            label: Label::Optional,
            kind,
            default: FieldDefault::Zero,
        }
    }

    /// A `repeated` field.
    pub const fn repeated(name: &'static str, number: u32, kind: FieldKind) -> Self {
        Self {
            label: Label::Repeated,
            ..Self::optional(name, number, kind)
        }
    }

    /// The same field with `[default = ...]`.
    pub const fn with_default(self, default: FieldDefault) -> Self {
        Self { default, ..self }
    }
}

/// Schemas are statics: one message type is one table.
impl PartialEq for MessageSchema {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// Fields are one entry of one table.
impl PartialEq for FieldSchema {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl MessageSchema {
    /// The field of that name.
    pub fn field(&self, name: &str) -> Option<&'static FieldSchema> {
        let fields: &'static [FieldSchema] = self.fields;
        fields.iter().find(|f| f.name == name)
    }

    /// The field of that number.
    pub fn field_by_number(&self, number: u32) -> Option<&'static FieldSchema> {
        let fields: &'static [FieldSchema] = self.fields;
        fields.iter().find(|f| f.number == number)
    }
}

/// One enum of `caffe.proto`: its value names and numbers.
#[derive(Debug)]
pub struct EnumSchema {
    /// Its name, e.g. `PoolMethod`.
    pub name: &'static str,
    /// `(NAME, value)` pairs.
    pub values: &'static [(&'static str, i32)],
}

impl EnumSchema {
    /// The value of a name.
    ///
    /// ```
    /// assert_eq!(blob_proto::schema::PHASE.value("TEST"), Some(1));
    /// ```
    pub fn value(&self, name: &str) -> Option<i32> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, v)| v)
    }

    /// The name of a value.
    ///
    /// ```
    /// assert_eq!(blob_proto::schema::PHASE.name_of(0), Some("TRAIN"));
    /// ```
    pub fn name_of(&self, value: i32) -> Option<&'static str> {
        self.values
            .iter()
            .find(|&&(_, v)| v == value)
            .map(|&(n, _)| n)
    }
}

use FieldKind::{Bool, Double, Float, Int32, Int64, String as Str, UInt32};

const fn opt(name: &'static str, number: u32, kind: FieldKind) -> FieldSchema {
    FieldSchema {
        name,
        number,
        label: Label::Optional,
        kind,
        default: FieldDefault::Zero,
    }
}

const fn def(
    name: &'static str,
    number: u32,
    kind: FieldKind,
    default: FieldDefault,
) -> FieldSchema {
    FieldSchema {
        name,
        number,
        label: Label::Optional,
        kind,
        default,
    }
}

const fn rep(name: &'static str, number: u32, kind: FieldKind) -> FieldSchema {
    FieldSchema {
        name,
        number,
        label: Label::Repeated,
        kind,
        default: FieldDefault::Zero,
    }
}

const fn msg(schema: &'static MessageSchema) -> FieldKind {
    FieldKind::Message(schema)
}

const fn en(schema: &'static EnumSchema) -> FieldKind {
    FieldKind::Enum(schema)
}

use FieldDefault::{Bool as B, Float as F, Int as I, Str as S};

macro_rules! enums {
    ($($(#[$doc:meta])* $id:ident $name:literal { $($v:ident = $n:literal),* $(,)? })*) => {$(
        $(#[$doc])*
        pub static $id: EnumSchema = EnumSchema {
            name: $name,
            values: &[$((stringify!($v), $n)),*],
        };
    )*};
}

macro_rules! messages {
    ($($(#[$doc:meta])* $id:ident $name:literal [$($field:expr),* $(,)?])*) => {$(
        $(#[$doc])*
        pub static $id: MessageSchema = MessageSchema {
            name: $name,
            fields: &[$($field),*],
        };
    )*};
}

enums! {
    /// `Phase`.
    PHASE "Phase" { TRAIN = 0, TEST = 1 }
    /// `ParamSpec.DimCheckMode`.
    DIM_CHECK_MODE "DimCheckMode" { STRICT = 0, PERMISSIVE = 1 }
    /// The `Engine` enums of the layer parameters.
    ENGINE "Engine" { DEFAULT = 0, CAFFE = 1, CUDNN = 2 }
    /// `PoolingParameter.PoolMethod`.
    POOL_METHOD "PoolMethod" { MAX = 0, AVE = 1, STOCHASTIC = 2 }
    /// `PoolingParameter.RoundMode`.
    ROUND_MODE "RoundMode" { CEIL = 0, FLOOR = 1 }
    /// `LRNParameter.NormRegion`.
    NORM_REGION "NormRegion" { ACROSS_CHANNELS = 0, WITHIN_CHANNEL = 1 }
    /// `EltwiseParameter.EltwiseOp`.
    ELTWISE_OP "EltwiseOp" { PROD = 0, SUM = 1, MAX = 2 }
    /// `FillerParameter.VarianceNorm`.
    VARIANCE_NORM "VarianceNorm" { FAN_IN = 0, FAN_OUT = 1, AVERAGE = 2 }
    /// `LossParameter.NormalizationMode`.
    NORMALIZATION "NormalizationMode" { FULL = 0, VALID = 1, BATCH_SIZE = 2, NONE = 3 }
    /// `DataParameter.DB`.
    DB "DB" { LEVELDB = 0, LMDB = 1 }
    /// `ReductionParameter.ReductionOp`.
    REDUCTION_OP "ReductionOp" { SUM = 1, ASUM = 2, SUMSQ = 3, MEAN = 4 }
    /// `PriorBoxParameter.CodeType` (SSD fork).
    CODE_TYPE "CodeType" { CORNER = 1, CENTER_SIZE = 2, CORNER_SIZE = 3 }
    /// `MultiBoxLossParameter.LocLossType` (SSD fork).
    LOC_LOSS_TYPE "LocLossType" { L2 = 0, SMOOTH_L1 = 1 }
    /// `MultiBoxLossParameter.ConfLossType` (SSD fork).
    CONF_LOSS_TYPE "ConfLossType" { SOFTMAX = 0, LOGISTIC = 1 }
    /// `MultiBoxLossParameter.MatchType` (SSD fork).
    MATCH_TYPE "MatchType" { BIPARTITE = 0, PER_PREDICTION = 1 }
    /// `MultiBoxLossParameter.MiningType` (SSD fork).
    MINING_TYPE "MiningType" { NONE = 0, MAX_NEGATIVE = 1, HARD_EXAMPLE = 2 }
    /// `ResizeParameter.Resize_mode` (SSD fork).
    RESIZE_MODE "Resize_mode" { WARP = 1, FIT_SMALL_SIZE = 2, FIT_LARGE_SIZE_AND_PAD = 3 }
    /// `ResizeParameter.Pad_mode` (SSD fork).
    PAD_MODE "Pad_mode" { CONSTANT = 1, MIRRORED = 2, REPEAT_NEAREST = 3 }
    /// `ResizeParameter.Interp_mode` (SSD fork; OpenCV's).
    INTERP_MODE "Interp_mode" { LINEAR = 1, AREA = 2, NEAREST = 3, CUBIC = 4, LANCZOS4 = 5 }
    /// `EmitConstraint.EmitType` (SSD fork).
    EMIT_TYPE "EmitType" { CENTER = 0, MIN_OVERLAP = 1 }
    /// `AnnotatedDatum.AnnotationType` (SSD fork; `BBOXandSeg` and `LANE`
    /// the YOLO fork's).
    ANNOTATION_TYPE "AnnotationType" { BBOX = 0, BBOXandSeg = 1, LANE = 2 }
    /// `SolverParameter.SnapshotFormat`.
    SNAPSHOT_FORMAT "SnapshotFormat" { HDF5 = 0, BINARYPROTO = 1 }
    /// `SolverParameter.SolverMode`.
    SOLVER_MODE "SolverMode" { CPU = 0, GPU = 1 }
    /// `SolverParameter.SolverType` (deprecated for `type`).
    SOLVER_TYPE "SolverType" { SGD = 0, NESTEROV = 1, ADAGRAD = 2, RMSPROP = 3, ADADELTA = 4, ADAM = 5 }
}

messages! {
    /// `BlobShape`.
    BLOB_SHAPE "BlobShape" [rep("dim", 1, Int64)]
    /// `BlobProto`.
    BLOB_PROTO "BlobProto" [
        opt("shape", 7, msg(&BLOB_SHAPE)), rep("data", 5, Float), rep("diff", 6, Float),
        rep("double_data", 8, Double), rep("double_diff", 9, Double),
        opt("num", 1, Int32), opt("channels", 2, Int32), opt("height", 3, Int32),
        opt("width", 4, Int32),
    ]
    /// `SolverParameter` (BVLC master's fields), for writing solver files
    /// (`upgrade_solver_proto_text`); `SolverFile` reads them.
    SOLVER_PARAMETER "SolverParameter" [
        opt("net", 24, Str), opt("net_param", 25, msg(&NET_PARAMETER)), opt("train_net", 1, Str),
        rep("test_net", 2, Str), opt("train_net_param", 21, msg(&NET_PARAMETER)),
        rep("test_net_param", 22, msg(&NET_PARAMETER)), opt("train_state", 26, msg(&NET_STATE)),
        rep("test_state", 27, msg(&NET_STATE)), rep("test_iter", 3, Int32),
        def("test_interval", 4, Int32, I(0)), def("test_compute_loss", 19, Bool, B(false)),
        def("test_initialization", 32, Bool, B(true)), opt("base_lr", 5, Float),
        opt("display", 6, Int32), def("average_loss", 33, Int32, I(1)), opt("max_iter", 7, Int32),
        def("iter_size", 36, Int32, I(1)), opt("lr_policy", 8, Str), opt("gamma", 9, Float),
        opt("power", 10, Float), opt("momentum", 11, Float), opt("weight_decay", 12, Float),
        def("regularization_type", 29, Str, S("L2")), opt("stepsize", 13, Int32),
        rep("stepvalue", 34, Int32), def("clip_gradients", 35, Float, F(-1.0)),
        def("snapshot", 14, Int32, I(0)), opt("snapshot_prefix", 15, Str),
        def("snapshot_diff", 16, Bool, B(false)),
        def("snapshot_format", 37, en(&SNAPSHOT_FORMAT), I(1)),
        def("solver_mode", 17, en(&SOLVER_MODE), I(1)), def("device_id", 18, Int32, I(0)),
        def("random_seed", 20, Int64, I(-1)), def("type", 40, Str, S("SGD")),
        def("delta", 31, Float, F(1e-8)), def("momentum2", 39, Float, F(0.999)),
        def("rms_decay", 38, Float, F(0.99)), def("debug_info", 23, Bool, B(false)),
        def("snapshot_after_train", 28, Bool, B(true)),
        def("solver_type", 30, en(&SOLVER_TYPE), I(0)),
        def("layer_wise_reduce", 41, Bool, B(true)), rep("weights", 42, Str),
        // The YOLO fork's (eric612/MobileNet-YOLO) `multifixed` stages.
        rep("stagelr", 50, Float), rep("stageiter", 51, Int32),
    ]
    /// `NetState`.
    NET_STATE "NetState" [
        def("phase", 1, en(&PHASE), I(1)), opt("level", 2, Int32), rep("stage", 3, Str),
    ]
    /// `NetStateRule`.
    NET_STATE_RULE "NetStateRule" [
        opt("phase", 1, en(&PHASE)), opt("min_level", 2, Int32), opt("max_level", 3, Int32),
        rep("stage", 4, Str), rep("not_stage", 5, Str),
    ]
    /// `ParamSpec`.
    PARAM_SPEC "ParamSpec" [
        opt("name", 1, Str), opt("share_mode", 2, en(&DIM_CHECK_MODE)),
        def("lr_mult", 3, Float, F(1.0)), def("decay_mult", 4, Float, F(1.0)),
    ]
    /// `FillerParameter`.
    FILLER "FillerParameter" [
        def("type", 1, Str, S("constant")), opt("value", 2, Float), opt("min", 3, Float),
        def("max", 4, Float, F(1.0)), opt("mean", 5, Float), def("std", 6, Float, F(1.0)),
        def("sparse", 7, Int32, I(-1)), opt("variance_norm", 8, en(&VARIANCE_NORM)),
    ]
    /// `NetParameter`.
    NET_PARAMETER "NetParameter" [
        opt("name", 1, Str), rep("input", 3, Str), rep("input_shape", 8, msg(&BLOB_SHAPE)),
        rep("input_dim", 4, Int32), opt("force_backward", 5, Bool),
        opt("state", 6, msg(&NET_STATE)), opt("debug_info", 7, Bool),
        rep("layer", 100, msg(&LAYER_PARAMETER)), rep("layers", 2, msg(&V1_LAYER_PARAMETER)),
    ]
    /// `LayerParameter`.
    LAYER_PARAMETER "LayerParameter" [
        opt("name", 1, Str), opt("type", 2, Str), rep("bottom", 3, Str), rep("top", 4, Str),
        opt("phase", 10, en(&PHASE)), rep("loss_weight", 5, Float),
        rep("param", 6, msg(&PARAM_SPEC)), rep("blobs", 7, msg(&BLOB_PROTO)),
        rep("propagate_down", 11, Bool), rep("include", 8, msg(&NET_STATE_RULE)),
        rep("exclude", 9, msg(&NET_STATE_RULE)),
        opt("transform_param", 100, msg(&TRANSFORMATION)), opt("loss_param", 101, msg(&LOSS)),
        opt("accuracy_param", 102, msg(&ACCURACY)), opt("argmax_param", 103, msg(&ARGMAX)),
        opt("batch_norm_param", 139, msg(&BATCH_NORM)), opt("bias_param", 141, msg(&BIAS)),
        opt("clip_param", 148, msg(&CLIP)), opt("concat_param", 104, msg(&CONCAT)),
        opt("contrastive_loss_param", 105, msg(&CONTRASTIVE_LOSS)),
        opt("convolution_param", 106, msg(&CONVOLUTION)), opt("crop_param", 144, msg(&CROP)),
        opt("data_param", 107, msg(&DATA)), opt("dropout_param", 108, msg(&DROPOUT)),
        opt("dummy_data_param", 109, msg(&DUMMY_DATA)), opt("eltwise_param", 110, msg(&ELTWISE)),
        opt("elu_param", 140, msg(&ELU)), opt("embed_param", 137, msg(&EMBED)),
        opt("exp_param", 111, msg(&EXP)), opt("flatten_param", 135, msg(&FLATTEN)),
        opt("hdf5_data_param", 112, msg(&HDF5_DATA)),
        opt("hdf5_output_param", 113, msg(&HDF5_OUTPUT)),
        opt("hinge_loss_param", 114, msg(&HINGE_LOSS)),
        opt("image_data_param", 115, msg(&IMAGE_DATA)),
        opt("infogain_loss_param", 116, msg(&INFOGAIN_LOSS)),
        opt("inner_product_param", 117, msg(&INNER_PRODUCT)),
        opt("input_param", 143, msg(&INPUT)), opt("log_param", 134, msg(&LOG)),
        opt("lrn_param", 118, msg(&LRN)), opt("memory_data_param", 119, msg(&MEMORY_DATA)),
        opt("mvn_param", 120, msg(&MVN)), opt("parameter_param", 145, msg(&PARAMETER)),
        opt("pooling_param", 121, msg(&POOLING)), opt("power_param", 122, msg(&POWER)),
        opt("prelu_param", 131, msg(&PRELU)), opt("python_param", 130, msg(&PYTHON)),
        opt("recurrent_param", 146, msg(&RECURRENT)),
        opt("reduction_param", 136, msg(&REDUCTION)), opt("relu_param", 123, msg(&RELU)),
        opt("reshape_param", 133, msg(&RESHAPE)), opt("scale_param", 142, msg(&SCALE)),
        opt("sigmoid_param", 124, msg(&ENGINE_ONLY)), opt("softmax_param", 125, msg(&SOFTMAX)),
        opt("spp_param", 132, msg(&SPP)), opt("slice_param", 126, msg(&SLICE)),
        opt("swish_param", 147, msg(&SWISH)), opt("tanh_param", 127, msg(&ENGINE_ONLY)),
        opt("threshold_param", 128, msg(&THRESHOLD)), opt("tile_param", 138, msg(&TILE)),
        opt("window_data_param", 129, msg(&WINDOW_DATA)),
        opt("permute_param", 202, msg(&PERMUTE)), opt("prior_box_param", 203, msg(&PRIOR_BOX)),
        opt("detection_output_param", 204, msg(&DETECTION_OUTPUT)),
        opt("multibox_loss_param", 201, msg(&MULTIBOX_LOSS)),
        opt("annotated_data_param", 200, msg(&ANNOTATED_DATA)),
        opt("detection_evaluate_param", 205, msg(&DETECTION_EVALUATE)),
        opt("norm_param", 206, msg(&NORMALIZE)),
    ]
    /// `V1LayerParameter` (the `layers` of older files), with the V0
    /// layer the oldest ones nest in it.
    V1_LAYER_PARAMETER "V1LayerParameter" [
        opt("layer", 1, msg(&V0_LAYER_PARAMETER)),
        rep("bottom", 2, Str), rep("top", 3, Str), opt("name", 4, Str),
        rep("include", 32, msg(&NET_STATE_RULE)), rep("exclude", 33, msg(&NET_STATE_RULE)),
        opt("type", 5, en(&V1_LAYER_TYPE)), rep("blobs", 6, msg(&BLOB_PROTO)),
        rep("param", 1001, Str), rep("blob_share_mode", 1002, en(&DIM_CHECK_MODE)),
        rep("blobs_lr", 7, Float), rep("weight_decay", 8, Float), rep("loss_weight", 35, Float),
        opt("accuracy_param", 27, msg(&ACCURACY)), opt("argmax_param", 23, msg(&ARGMAX)),
        opt("concat_param", 9, msg(&CONCAT)),
        opt("contrastive_loss_param", 40, msg(&CONTRASTIVE_LOSS)),
        opt("convolution_param", 10, msg(&CONVOLUTION)), opt("data_param", 11, msg(&DATA)),
        opt("dropout_param", 12, msg(&DROPOUT)), opt("dummy_data_param", 26, msg(&DUMMY_DATA)),
        opt("eltwise_param", 24, msg(&ELTWISE)), opt("exp_param", 41, msg(&EXP)),
        opt("hdf5_data_param", 13, msg(&HDF5_DATA)),
        opt("hdf5_output_param", 14, msg(&HDF5_OUTPUT)),
        opt("hinge_loss_param", 29, msg(&HINGE_LOSS)),
        opt("image_data_param", 15, msg(&IMAGE_DATA)),
        opt("infogain_loss_param", 16, msg(&INFOGAIN_LOSS)),
        opt("inner_product_param", 17, msg(&INNER_PRODUCT)), opt("lrn_param", 18, msg(&LRN)),
        opt("memory_data_param", 22, msg(&MEMORY_DATA)), opt("mvn_param", 34, msg(&MVN)),
        opt("pooling_param", 19, msg(&POOLING)), opt("power_param", 21, msg(&POWER)),
        opt("relu_param", 30, msg(&RELU)), opt("sigmoid_param", 38, msg(&ENGINE_ONLY)),
        opt("softmax_param", 39, msg(&SOFTMAX)), opt("slice_param", 31, msg(&SLICE)),
        opt("tanh_param", 37, msg(&ENGINE_ONLY)), opt("threshold_param", 25, msg(&THRESHOLD)),
        opt("window_data_param", 20, msg(&WINDOW_DATA)),
        opt("transform_param", 36, msg(&TRANSFORMATION)), opt("loss_param", 42, msg(&LOSS)),
    ]
    /// `V0LayerParameter` (2014 files: one flat message for every type).
    V0_LAYER_PARAMETER "V0LayerParameter" [
        opt("name", 1, Str), opt("type", 2, Str), opt("num_output", 3, UInt32),
        def("biasterm", 4, Bool, B(true)), opt("weight_filler", 5, msg(&FILLER)),
        opt("bias_filler", 6, msg(&FILLER)), opt("pad", 7, UInt32), opt("kernelsize", 8, UInt32),
        def("group", 9, UInt32, I(1)), def("stride", 10, UInt32, I(1)),
        opt("pool", 11, en(&POOL_METHOD)), def("dropout_ratio", 12, Float, F(0.5)),
        def("local_size", 13, UInt32, I(5)), def("alpha", 14, Float, F(1.0)),
        def("beta", 15, Float, F(0.75)), def("k", 22, Float, F(1.0)), opt("source", 16, Str),
        def("scale", 17, Float, F(1.0)), opt("meanfile", 18, Str), opt("batchsize", 19, UInt32),
        opt("cropsize", 20, UInt32), opt("mirror", 21, Bool), rep("blobs", 50, msg(&BLOB_PROTO)),
        rep("blobs_lr", 51, Float), rep("weight_decay", 52, Float), opt("rand_skip", 53, UInt32),
        def("det_fg_threshold", 54, Float, F(0.5)), def("det_bg_threshold", 55, Float, F(0.5)),
        def("det_fg_fraction", 56, Float, F(0.25)), opt("det_context_pad", 58, UInt32),
        def("det_crop_mode", 59, Str, S("warp")), opt("new_num", 60, Int32),
        opt("new_channels", 61, Int32), opt("new_height", 62, Int32), opt("new_width", 63, Int32),
        opt("shuffle_images", 64, Bool), def("concat_dim", 65, UInt32, I(1)),
        opt("hdf5_output_param", 1001, msg(&HDF5_OUTPUT)),
    ]
    /// `TransformationParameter`.
    TRANSFORMATION "TransformationParameter" [
        def("scale", 1, Float, F(1.0)), opt("mirror", 2, Bool), opt("crop_size", 3, UInt32),
        opt("mean_file", 4, Str), rep("mean_value", 5, Float), opt("force_color", 6, Bool),
        opt("force_gray", 7, Bool), opt("crop_h", 11, UInt32), opt("crop_w", 12, UInt32),
        // Repeated as in the YOLO fork (its multi-scale training); the
        // SSD fork's one reads the same.
        rep("resize_param", 8, msg(&RESIZE)), opt("noise_param", 9, msg(&NOISE)),
        opt("distort_param", 13, msg(&DISTORTION)), opt("expand_param", 14, msg(&EXPANSION)),
        opt("emit_constraint", 10, msg(&EMIT_CONSTRAINT)),
    ]
    /// `ResizeParameter` (SSD fork).
    RESIZE "ResizeParameter" [
        def("prob", 1, Float, F(1.0)), def("resize_mode", 2, en(&RESIZE_MODE), I(1)),
        opt("height", 3, UInt32), opt("width", 4, UInt32), opt("height_scale", 8, UInt32),
        opt("width_scale", 9, UInt32), def("pad_mode", 5, en(&PAD_MODE), I(1)),
        rep("pad_value", 6, Float), rep("interp_mode", 7, en(&INTERP_MODE)),
    ]
    /// `SaltPepperParameter` (SSD fork).
    SALT_PEPPER "SaltPepperParameter" [opt("fraction", 1, Float), rep("value", 2, Float)]
    /// `NoiseParameter` (SSD fork).
    NOISE "NoiseParameter" [
        opt("prob", 1, Float), opt("hist_eq", 2, Bool), opt("inverse", 3, Bool),
        opt("decolorize", 4, Bool), opt("gauss_blur", 5, Bool), def("jpeg", 6, Float, F(-1.0)),
        opt("posterize", 7, Bool), opt("erode", 8, Bool), opt("saltpepper", 9, Bool),
        opt("saltpepper_param", 10, msg(&SALT_PEPPER)), opt("clahe", 11, Bool),
        opt("convert_to_hsv", 12, Bool), opt("convert_to_lab", 13, Bool),
    ]
    /// `DistortionParameter` (SSD fork).
    DISTORTION "DistortionParameter" [
        opt("brightness_prob", 1, Float), opt("brightness_delta", 2, Float),
        opt("contrast_prob", 3, Float), opt("contrast_lower", 4, Float),
        opt("contrast_upper", 5, Float), opt("hue_prob", 6, Float), opt("hue_delta", 7, Float),
        opt("saturation_prob", 8, Float), opt("saturation_lower", 9, Float),
        opt("saturation_upper", 10, Float), opt("random_order_prob", 11, Float),
    ]
    /// `ExpansionParameter` (SSD fork).
    EXPANSION "ExpansionParameter" [
        def("prob", 1, Float, F(1.0)), def("max_expand_ratio", 2, Float, F(1.0)),
    ]
    /// `EmitConstraint` (SSD fork).
    EMIT_CONSTRAINT "EmitConstraint" [
        def("emit_type", 1, en(&EMIT_TYPE), I(0)), opt("emit_overlap", 2, Float),
    ]
    /// `Sampler` (SSD fork).
    SAMPLER "Sampler" [
        def("min_scale", 1, Float, F(1.0)), def("max_scale", 2, Float, F(1.0)),
        def("min_aspect_ratio", 3, Float, F(1.0)), def("max_aspect_ratio", 4, Float, F(1.0)),
    ]
    /// `SampleConstraint` (SSD fork).
    SAMPLE_CONSTRAINT "SampleConstraint" [
        opt("min_jaccard_overlap", 1, Float), opt("max_jaccard_overlap", 2, Float),
        opt("min_sample_coverage", 3, Float), opt("max_sample_coverage", 4, Float),
        opt("min_object_coverage", 5, Float), opt("max_object_coverage", 6, Float),
    ]
    /// `BatchSampler` (SSD fork).
    BATCH_SAMPLER "BatchSampler" [
        def("use_original_image", 1, Bool, B(true)), opt("sampler", 2, msg(&SAMPLER)),
        opt("sample_constraint", 3, msg(&SAMPLE_CONSTRAINT)), opt("max_sample", 4, UInt32),
        def("max_trials", 5, UInt32, I(100)),
    ]
    /// `LabelMapItem` (SSD fork): a class's name, label and display name.
    LABEL_MAP_ITEM "LabelMapItem" [
        opt("name", 1, Str), opt("label", 2, Int32), opt("display_name", 3, Str),
    ]
    /// `LabelMap` (SSD fork: `labelmap_voc.prototxt`).
    LABEL_MAP "LabelMap" [rep("item", 1, msg(&LABEL_MAP_ITEM))]
    /// `AnnotatedDataParameter` (SSD fork; fields 4 to 11 the YOLO fork's).
    ANNOTATED_DATA "AnnotatedDataParameter" [
        rep("batch_sampler", 1, msg(&BATCH_SAMPLER)), opt("label_map_file", 2, Str),
        opt("anno_type", 3, en(&ANNOTATION_TYPE)),
        // The YOLO fork's (eric612/MobileNet-YOLO): its label layout,
        // crop jitter and segmentation labels.
        def("yolo_data_type", 4, Int32, I(0)), def("yolo_data_jitter", 5, Float, F(0.3)),
        def("train_diffcult", 6, Bool, B(true)), def("single_class", 7, Bool, B(true)),
        def("seg_scales", 8, Int32, I(8)), def("seg_resize_width", 9, Int32, I(0)),
        def("seg_resize_height", 10, Int32, I(0)),
        def("difficult_label_warmup", 11, Bool, B(false)),
    ]
    /// `LossParameter`.
    LOSS "LossParameter" [
        opt("ignore_label", 1, Int32), def("normalization", 3, en(&NORMALIZATION), I(1)),
        opt("normalize", 2, Bool),
    ]
    /// `AccuracyParameter`.
    ACCURACY "AccuracyParameter" [
        def("top_k", 1, UInt32, I(1)), def("axis", 2, Int32, I(1)), opt("ignore_label", 3, Int32),
    ]
    /// `ArgMaxParameter`.
    ARGMAX "ArgMaxParameter" [
        opt("out_max_val", 1, Bool), def("top_k", 2, UInt32, I(1)), opt("axis", 3, Int32),
    ]
    /// `BatchNormParameter`.
    BATCH_NORM "BatchNormParameter" [
        opt("use_global_stats", 1, Bool), def("moving_average_fraction", 2, Float, F(0.999)),
        def("eps", 3, Float, F(1e-5)),
    ]
    /// `BiasParameter`.
    BIAS "BiasParameter" [
        def("axis", 1, Int32, I(1)), def("num_axes", 2, Int32, I(1)),
        opt("filler", 3, msg(&FILLER)),
    ]
    /// `ClipParameter`.
    CLIP "ClipParameter" [opt("min", 1, Float), opt("max", 2, Float)]
    /// `ConcatParameter`.
    CONCAT "ConcatParameter" [def("axis", 2, Int32, I(1)), def("concat_dim", 1, UInt32, I(1))]
    /// `ContrastiveLossParameter`.
    CONTRASTIVE_LOSS "ContrastiveLossParameter" [
        def("margin", 1, Float, F(1.0)), opt("legacy_version", 2, Bool),
    ]
    /// `ConvolutionParameter`.
    CONVOLUTION "ConvolutionParameter" [
        opt("num_output", 1, UInt32), def("bias_term", 2, Bool, B(true)), rep("pad", 3, UInt32),
        rep("kernel_size", 4, UInt32), rep("stride", 6, UInt32), rep("dilation", 18, UInt32),
        opt("pad_h", 9, UInt32), opt("pad_w", 10, UInt32), opt("kernel_h", 11, UInt32),
        opt("kernel_w", 12, UInt32), opt("stride_h", 13, UInt32), opt("stride_w", 14, UInt32),
        def("group", 5, UInt32, I(1)), opt("weight_filler", 7, msg(&FILLER)),
        opt("bias_filler", 8, msg(&FILLER)), opt("engine", 15, en(&ENGINE)),
        def("axis", 16, Int32, I(1)), opt("force_nd_im2col", 17, Bool),
    ]
    /// `CropParameter`.
    CROP "CropParameter" [def("axis", 1, Int32, I(2)), rep("offset", 2, UInt32)]
    /// `DataParameter`.
    DATA "DataParameter" [
        opt("source", 1, Str), opt("batch_size", 4, UInt32), opt("rand_skip", 7, UInt32),
        opt("backend", 8, en(&DB)), def("scale", 2, Float, F(1.0)), opt("mean_file", 3, Str),
        opt("crop_size", 5, UInt32), opt("mirror", 6, Bool),
        opt("force_encoded_color", 9, Bool), def("prefetch", 10, UInt32, I(4)),
    ]
    /// `DropoutParameter`.
    DROPOUT "DropoutParameter" [
        def("dropout_ratio", 1, Float, F(0.5)), def("scale_train", 2, Bool, B(true)),
    ]
    /// `DummyDataParameter`.
    DUMMY_DATA "DummyDataParameter" [
        rep("data_filler", 1, msg(&FILLER)), rep("shape", 6, msg(&BLOB_SHAPE)),
        rep("num", 2, UInt32), rep("channels", 3, UInt32), rep("height", 4, UInt32),
        rep("width", 5, UInt32),
    ]
    /// `EltwiseParameter`.
    ELTWISE "EltwiseParameter" [
        def("operation", 1, en(&ELTWISE_OP), I(1)), rep("coeff", 2, Float),
        def("stable_prod_grad", 3, Bool, B(true)),
    ]
    /// `ELUParameter`.
    ELU "ELUParameter" [def("alpha", 1, Float, F(1.0))]
    /// `EmbedParameter`.
    EMBED "EmbedParameter" [
        opt("num_output", 1, UInt32), opt("input_dim", 2, UInt32),
        def("bias_term", 3, Bool, B(true)), opt("weight_filler", 4, msg(&FILLER)),
        opt("bias_filler", 5, msg(&FILLER)),
    ]
    /// `ExpParameter`.
    EXP "ExpParameter" [
        def("base", 1, Float, F(-1.0)), def("scale", 2, Float, F(1.0)), opt("shift", 3, Float),
    ]
    /// `FlattenParameter`.
    FLATTEN "FlattenParameter" [def("axis", 1, Int32, I(1)), def("end_axis", 2, Int32, I(-1))]
    /// `HDF5DataParameter`.
    HDF5_DATA "HDF5DataParameter" [
        opt("source", 1, Str), opt("batch_size", 2, UInt32), opt("shuffle", 3, Bool),
    ]
    /// `HDF5OutputParameter`.
    HDF5_OUTPUT "HDF5OutputParameter" [opt("file_name", 1, Str)]
    /// `HingeLossParameter`.
    HINGE_LOSS "HingeLossParameter" [def("norm", 1, en(&HINGE_NORM), I(1))]
    /// `ImageDataParameter`.
    IMAGE_DATA "ImageDataParameter" [
        opt("source", 1, Str), def("batch_size", 4, UInt32, I(1)), opt("rand_skip", 7, UInt32),
        opt("shuffle", 8, Bool), opt("new_height", 9, UInt32), opt("new_width", 10, UInt32),
        def("is_color", 11, Bool, B(true)), def("scale", 2, Float, F(1.0)),
        opt("mean_file", 3, Str), opt("crop_size", 5, UInt32), opt("mirror", 6, Bool),
        opt("root_folder", 12, Str),
    ]
    /// `InfogainLossParameter`.
    INFOGAIN_LOSS "InfogainLossParameter" [opt("source", 1, Str), def("axis", 2, Int32, I(1))]
    /// `InnerProductParameter`.
    INNER_PRODUCT "InnerProductParameter" [
        opt("num_output", 1, UInt32), def("bias_term", 2, Bool, B(true)),
        opt("weight_filler", 3, msg(&FILLER)), opt("bias_filler", 4, msg(&FILLER)),
        def("axis", 5, Int32, I(1)), opt("transpose", 6, Bool),
    ]
    /// `InputParameter`.
    INPUT "InputParameter" [rep("shape", 1, msg(&BLOB_SHAPE))]
    /// `LogParameter`.
    LOG "LogParameter" [
        def("base", 1, Float, F(-1.0)), def("scale", 2, Float, F(1.0)), opt("shift", 3, Float),
    ]
    /// `LRNParameter`.
    LRN "LRNParameter" [
        def("local_size", 1, UInt32, I(5)), def("alpha", 2, Float, F(1.0)),
        def("beta", 3, Float, F(0.75)), opt("norm_region", 4, en(&NORM_REGION)),
        def("k", 5, Float, F(1.0)), opt("engine", 6, en(&ENGINE)),
    ]
    /// `MemoryDataParameter`.
    MEMORY_DATA "MemoryDataParameter" [
        opt("batch_size", 1, UInt32), opt("channels", 2, UInt32), opt("height", 3, UInt32),
        opt("width", 4, UInt32),
    ]
    /// `MVNParameter`.
    MVN "MVNParameter" [
        def("normalize_variance", 1, Bool, B(true)), opt("across_channels", 2, Bool),
        def("eps", 3, Float, F(1e-9)),
    ]
    /// `ParameterParameter`.
    PARAMETER "ParameterParameter" [opt("shape", 1, msg(&BLOB_SHAPE))]
    /// `PoolingParameter`.
    POOLING "PoolingParameter" [
        opt("pool", 1, en(&POOL_METHOD)), opt("pad", 4, UInt32), opt("pad_h", 9, UInt32),
        opt("pad_w", 10, UInt32), opt("kernel_size", 2, UInt32), opt("kernel_h", 5, UInt32),
        opt("kernel_w", 6, UInt32), def("stride", 3, UInt32, I(1)), opt("stride_h", 7, UInt32),
        opt("stride_w", 8, UInt32), opt("engine", 11, en(&ENGINE)),
        opt("global_pooling", 12, Bool), opt("round_mode", 13, en(&ROUND_MODE)),
    ]
    /// `PowerParameter`.
    POWER "PowerParameter" [
        def("power", 1, Float, F(1.0)), def("scale", 2, Float, F(1.0)), opt("shift", 3, Float),
    ]
    /// `PReLUParameter`.
    PRELU "PReLUParameter" [opt("filler", 1, msg(&FILLER)), opt("channel_shared", 2, Bool)]
    /// `PythonParameter`.
    PYTHON "PythonParameter" [
        opt("module", 1, Str), opt("layer", 2, Str), opt("param_str", 3, Str),
        opt("share_in_parallel", 4, Bool),
    ]
    /// `RecurrentParameter`.
    RECURRENT "RecurrentParameter" [
        opt("num_output", 1, UInt32), opt("weight_filler", 2, msg(&FILLER)),
        opt("bias_filler", 3, msg(&FILLER)), opt("debug_info", 4, Bool),
        opt("expose_hidden", 5, Bool),
    ]
    /// `ReductionParameter`.
    REDUCTION "ReductionParameter" [
        def("operation", 1, en(&REDUCTION_OP), I(1)), opt("axis", 2, Int32),
        def("coeff", 3, Float, F(1.0)),
    ]
    /// `ReLUParameter`.
    RELU "ReLUParameter" [opt("negative_slope", 1, Float), opt("engine", 2, en(&ENGINE))]
    /// `ReshapeParameter`.
    RESHAPE "ReshapeParameter" [
        opt("shape", 1, msg(&BLOB_SHAPE)), opt("axis", 2, Int32), def("num_axes", 3, Int32, I(-1)),
    ]
    /// `ScaleParameter`.
    SCALE "ScaleParameter" [
        def("axis", 1, Int32, I(1)), def("num_axes", 2, Int32, I(1)),
        opt("filler", 3, msg(&FILLER)), opt("bias_term", 4, Bool),
        opt("bias_filler", 5, msg(&FILLER)),
    ]
    /// `SigmoidParameter` and `TanHParameter`: an engine alone.
    ENGINE_ONLY "EngineParameter" [opt("engine", 1, en(&ENGINE))]
    /// `SoftmaxParameter`.
    SOFTMAX "SoftmaxParameter" [opt("engine", 1, en(&ENGINE)), def("axis", 2, Int32, I(1))]
    /// `SPPParameter`.
    SPP "SPPParameter" [
        opt("pyramid_height", 1, UInt32), opt("pool", 2, en(&POOL_METHOD)),
        opt("engine", 6, en(&ENGINE)),
    ]
    /// `SliceParameter`.
    SLICE "SliceParameter" [
        def("axis", 3, Int32, I(1)), rep("slice_point", 2, UInt32),
        def("slice_dim", 1, UInt32, I(1)),
    ]
    /// `SwishParameter`.
    SWISH "SwishParameter" [def("beta", 1, Float, F(1.0))]
    /// `ThresholdParameter`.
    THRESHOLD "ThresholdParameter" [opt("threshold", 1, Float)]
    /// `TileParameter`.
    TILE "TileParameter" [def("axis", 1, Int32, I(1)), opt("tiles", 2, Int32)]
    /// `WindowDataParameter`.
    WINDOW_DATA "WindowDataParameter" [
        opt("source", 1, Str), def("scale", 2, Float, F(1.0)), opt("mean_file", 3, Str),
        opt("batch_size", 4, UInt32), opt("crop_size", 5, UInt32), opt("mirror", 6, Bool),
        def("fg_threshold", 7, Float, F(0.5)), def("bg_threshold", 8, Float, F(0.5)),
        def("fg_fraction", 9, Float, F(0.25)), opt("context_pad", 10, UInt32),
        def("crop_mode", 11, Str, S("warp")), opt("cache_images", 12, Bool),
        opt("root_folder", 13, Str),
    ]
    /// `PermuteParameter` (SSD fork).
    PERMUTE "PermuteParameter" [rep("order", 1, UInt32)]
    /// `PriorBoxParameter` (SSD fork).
    PRIOR_BOX "PriorBoxParameter" [
        rep("min_size", 1, Float), rep("max_size", 2, Float), rep("aspect_ratio", 3, Float),
        def("flip", 4, Bool, B(true)), opt("clip", 5, Bool), rep("variance", 6, Float),
        opt("img_size", 7, UInt32), opt("img_h", 8, UInt32), opt("img_w", 9, UInt32),
        opt("step", 10, Float), opt("step_h", 11, Float), opt("step_w", 12, Float),
        def("offset", 13, Float, F(0.5)),
    ]
    /// `NonMaximumSuppressionParameter` (SSD fork).
    NMS "NonMaximumSuppressionParameter" [
        def("nms_threshold", 1, Float, F(0.3)), opt("top_k", 2, Int32),
        def("eta", 3, Float, F(1.0)),
    ]
    /// `SaveOutputParameter` (SSD fork).
    SAVE_OUTPUT "SaveOutputParameter" [
        opt("output_directory", 1, Str), opt("output_name_prefix", 2, Str),
        opt("output_format", 3, Str), opt("label_map_file", 4, Str),
        opt("name_size_file", 5, Str), opt("num_test_image", 6, UInt32),
        opt("resize_param", 7, msg(&RESIZE)),
    ]
    /// `DetectionOutputParameter` (SSD fork).
    DETECTION_OUTPUT "DetectionOutputParameter" [
        opt("num_classes", 1, UInt32), def("share_location", 2, Bool, B(true)),
        opt("background_label_id", 3, Int32), opt("nms_param", 4, msg(&NMS)),
        opt("save_output_param", 5, msg(&SAVE_OUTPUT)), def("code_type", 6, en(&CODE_TYPE), I(1)),
        def("keep_top_k", 7, Int32, I(-1)), opt("variance_encoded_in_target", 8, Bool),
        opt("confidence_threshold", 9, Float), opt("visualize", 10, Bool),
        opt("visualize_threshold", 11, Float), opt("save_file", 12, Str),
    ]
    /// `MultiBoxLossParameter` (SSD fork).
    MULTIBOX_LOSS "MultiBoxLossParameter" [
        def("loc_loss_type", 1, en(&LOC_LOSS_TYPE), I(1)),
        def("conf_loss_type", 2, en(&CONF_LOSS_TYPE), I(0)),
        def("loc_weight", 3, Float, F(1.0)), opt("num_classes", 4, UInt32),
        def("share_location", 5, Bool, B(true)), def("match_type", 6, en(&MATCH_TYPE), I(1)),
        def("overlap_threshold", 7, Float, F(0.5)),
        def("use_prior_for_matching", 8, Bool, B(true)), opt("background_label_id", 9, UInt32),
        def("use_difficult_gt", 10, Bool, B(true)), opt("do_neg_mining", 11, Bool),
        def("neg_pos_ratio", 12, Float, F(3.0)), def("neg_overlap", 13, Float, F(0.5)),
        def("code_type", 14, en(&CODE_TYPE), I(1)),
        opt("encode_variance_in_target", 16, Bool), opt("map_object_to_agnostic", 17, Bool),
        opt("ignore_cross_boundary_bbox", 18, Bool), opt("bp_inside", 19, Bool),
        def("mining_type", 20, en(&MINING_TYPE), I(1)), opt("nms_param", 21, msg(&NMS)),
        def("sample_size", 22, Int32, I(64)), opt("use_prior_for_nms", 23, Bool),
    ]
    /// `DetectionEvaluateParameter` (SSD fork).
    DETECTION_EVALUATE "DetectionEvaluateParameter" [
        opt("num_classes", 1, UInt32), opt("background_label_id", 2, UInt32),
        def("overlap_threshold", 3, Float, F(0.5)), def("evaluate_difficult_gt", 4, Bool, B(true)),
        opt("name_size_file", 5, Str), opt("resize_param", 6, msg(&RESIZE)),
    ]
    /// `NormalizeParameter` (SSD fork).
    NORMALIZE "NormalizeParameter" [
        def("across_spatial", 1, Bool, B(true)), opt("scale_filler", 2, msg(&FILLER)),
        def("channel_shared", 3, Bool, B(true)), def("eps", 4, Float, F(1e-10)),
    ]
}

enums! {
    /// `HingeLossParameter.Norm`.
    HINGE_NORM "Norm" { L1 = 1, L2 = 2 }
    /// `V1LayerParameter.LayerType`.
    V1_LAYER_TYPE "LayerType" {
        NONE = 0, ABSVAL = 35, ACCURACY = 1, ARGMAX = 30, BNLL = 2, CONCAT = 3,
        CONTRASTIVE_LOSS = 37, CONVOLUTION = 4, DECONVOLUTION = 39, DATA = 5, DROPOUT = 6,
        DUMMY_DATA = 32, EUCLIDEAN_LOSS = 7, ELTWISE = 25, EXP = 38, FLATTEN = 8,
        HDF5_DATA = 9, HDF5_OUTPUT = 10, HINGE_LOSS = 28, IM2COL = 11, IMAGE_DATA = 12,
        INFOGAIN_LOSS = 13, INNER_PRODUCT = 14, LRN = 15, MEMORY_DATA = 29,
        MULTINOMIAL_LOGISTIC_LOSS = 16, MVN = 34, POOLING = 17, POWER = 26, RELU = 18,
        SIGMOID = 19, SIGMOID_CROSS_ENTROPY_LOSS = 27, SILENCE = 36, SOFTMAX = 20,
        SOFTMAX_LOSS = 21, SPLIT = 22, SLICE = 33, TANH = 23, WINDOW_DATA = 24, THRESHOLD = 31,
    }
}
