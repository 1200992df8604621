//! The layers of Caffe's forks that public models use, registered with
//! their parameter messages through the same
//! [`LayerRegistry::register_with_param`] a user's own layer takes. (The
//! SSD fork's messages and Dropout's `scale_train`, which predate the
//! registry, stay in the built-in tables.)

use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_proto::{ParamMessage, ParamValue};
use blob_runtime::MathElement;

use crate::axpy::AxpyLayer;
use crate::bn::{BN_FIELD, BnLayer};
use crate::conv::ConvolutionLayer;
use crate::dropout::SpatialDropoutLayer;
use crate::interp::{INTERP_FIELD, InterpLayer};
use crate::layer::Result;
use crate::neuron::NeuronLayer;
use crate::pool::PoolingLayer;
use crate::prior_box::PriorBoxLayer;
use crate::proposal::{PROPOSAL_FIELD, ProposalLayer};
use crate::psroi_pooling::{PSROI_POOLING_FIELD, PsRoiPoolingLayer};
use crate::registry::LayerRegistry;
use crate::reorg::{REORG_FIELD, ReorgLayer};
use crate::roi_pooling::{ROI_POOLING_FIELD, RoiPoolingLayer};
use crate::shuffle_channel::{SHUFFLE_CHANNEL_FIELD, ShuffleChannelLayer};
use crate::upsample::{UPSAMPLE_FIELD, UpsampleLayer};
use crate::yolo::{
    AssistedExcitationLayer, REGION_LOSS_FIELD, RegionLossLayer, SEGMENTATION_EVALUATE_FIELD,
    SegmentationEvaluateLayer, YOLO_DETECTION_OUTPUT_FIELD, YOLO_SEG_FIELD,
    YOLOV3_DETECTION_OUTPUT_FIELD, YOLOV3_FIELD, YoloDetectionOutputLayer, YoloSegLayer, YoloV2,
    YoloV3, Yolov3LossLayer,
};

/// A Caffe fork that gives one of Caffe's own layer types other
/// arithmetic under the same name and fields: its nets read as Caffe's
/// and compute otherwise, so it is asked for by name
/// ([`LayerRegistry::use_fork`], `--fork` of the command line).
///
/// ```
/// use blob_layers::Fork;
/// assert_eq!(Fork::from_name("caffe-yolov3"), Some(Fork::CaffeYolov3));
/// assert_eq!(Fork::CaffeYolov3.name(), "caffe-yolov3");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fork {
    /// ChenYingpeng/caffe-yolov3 (its `pooling_layer.cpp`): a Pooling
    /// whose kernel's height exceeds its stride by an odd number gets one
    /// more output row and column, so that darknet's maxpool of size 2
    /// and stride 1 keeps YOLOv3-tiny's 13 x 13 map (Caffe's gives 12 x
    /// 12). It changes 3 x 3 pools at stride 2 too, as the fork does.
    CaffeYolov3,
    /// sfzhang15/FaceBoxes (its `prior_box_layer.cpp`): PriorBox tiles a
    /// min size of 32 4 x 4 and of 64 2 x 2 about each cell's centre,
    /// and makes each min size's square one pixel smaller.
    FaceBoxes,
}

impl Fork {
    /// Every fork, for listing.
    pub const ALL: [Fork; 2] = [Fork::CaffeYolov3, Fork::FaceBoxes];

    /// The fork by its name (as `name` gives it).
    pub fn from_name(name: &str) -> Option<Fork> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Its name: the fork's repository's.
    pub fn name(self) -> &'static str {
        match self {
            Fork::CaffeYolov3 => "caffe-yolov3",
            Fork::FaceBoxes => "faceboxes",
        }
    }
}

/// Registers `fork`'s forms of Caffe's layer types in place of Caffe's.
pub(crate) fn use_fork<T: MathElement>(r: &mut LayerRegistry<T>, fork: Fork) {
    match fork {
        Fork::CaffeYolov3 => r.register("Pooling", |p| {
            Ok(Box::new(PoolingLayer::from_param(p)?.with_darknet_sizes()))
        }),
        Fork::FaceBoxes => r.register("PriorBox", |p| {
            Ok(Box::new(
                PriorBoxLayer::from_param(p)?.with_faceboxes_density()?,
            ))
        }),
    }
}

/// `ceil_mode` in `PoolingParameter` (BVLC/caffe#3057, used by nets
/// converted from PyTorch): `false` rounds the output size down, as
/// `round_mode: FLOOR` does. Its fork number, 13, is BVLC master's
/// `round_mode`, so 1013 here (Netron's numbering).
pub(crate) const CEIL_MODE_FIELD: FieldSchema =
    FieldSchema::optional("ceil_mode", 1013, FieldKind::Bool)
        .with_default(FieldDefault::Bool(true));

/// SegNet's class weighting in `LossParameter` (its SoftmaxWithLoss
/// multiplies each position's loss and gradient by its label's weight).
/// The fork numbers `weight_by_label_freqs` 3, which BVLC's
/// `normalization` holds, so 1003 here; `class_weighting` keeps its 4.
pub(crate) const WEIGHT_BY_LABEL_FREQS_FIELD: FieldSchema =
    FieldSchema::optional("weight_by_label_freqs", 1003, FieldKind::Bool);
/// See [`WEIGHT_BY_LABEL_FREQS_FIELD`].
pub(crate) const CLASS_WEIGHTING_FIELD: FieldSchema =
    FieldSchema::repeated("class_weighting", 4, FieldKind::Float);

/// A fork's parameter message of `layer`, or its defaults: also for a
/// layer read against tables without the fork's field (built by hand
/// from Caffe's `LAYER_PARAMETER`).
pub(crate) fn fork_param(
    layer: &ParamMessage,
    field: &FieldSchema,
    schema: &'static MessageSchema,
) -> ParamMessage {
    layer
        .get(field.name)
        .and_then(|v| match v {
            ParamValue::Message(m) => Some(m.clone()),
            _ => None,
        })
        .unwrap_or_else(|| ParamMessage::new(schema))
}

/// Registers the forks' parameter fields and layer types.
pub(crate) fn register_forks<T: MathElement>(r: &mut LayerRegistry<T>) -> Result<()> {
    r.register_param_field(&blob_proto::schema::POOLING, CEIL_MODE_FIELD)?;
    r.register_param_field(&blob_proto::schema::LOSS, WEIGHT_BY_LABEL_FREQS_FIELD)?;
    r.register_param_field(&blob_proto::schema::LOSS, CLASS_WEIGHTING_FIELD)?;
    r.register_with_param("Interp", INTERP_FIELD, |p| {
        Ok(Box::new(InterpLayer::from_param(p)?))
    })?;
    r.register_with_param("BN", BN_FIELD, |p| {
        Ok(Box::new(BnLayer::<T>::from_param(p)?))
    })?;
    r.register_with_param("ShuffleChannel", SHUFFLE_CHANNEL_FIELD, |p| {
        Ok(Box::new(ShuffleChannelLayer::from_param(p)?))
    })?;
    r.register_with_param("Upsample", UPSAMPLE_FIELD, |p| {
        Ok(Box::new(UpsampleLayer::from_param(p)?))
    })?;
    r.register_with_param("ROIPooling", ROI_POOLING_FIELD, |p| {
        Ok(Box::new(RoiPoolingLayer::from_param(p)?))
    })?;
    r.register_with_param("Proposal", PROPOSAL_FIELD, |p| {
        Ok(Box::new(ProposalLayer::from_param(p)?))
    })?;
    r.register("Python", |p| {
        let python = p.message("python_param");
        let (module, layer) = python.map_or(("", ""), |m| (m.string("module"), m.string("layer")));
        match (module, layer) {
            ("rpn.proposal_layer", "ProposalLayer") => {
                return Ok(Box::new(ProposalLayer::from_python(p)?));
            }
            ("spatial_dropout", "SpatialDropoutLayer") => {
                return Ok(Box::new(SpatialDropoutLayer::from_python(p)?));
            }
            _ => {}
        }
        Err(crate::dyn_layer::bad_param(
            "set up a Python layer",
            format!(
                "python_param names {}.{}: Python layers run Python code, which blobflow \
                 cannot; py-faster-rcnn's rpn.proposal_layer.ProposalLayer (as Proposal) and \
                 ENet's spatial_dropout.SpatialDropoutLayer are the ones it runs. Register a \
                 layer of your own under type \"Python\" to run others",
                blob_proto::excerpt(module),
                blob_proto::excerpt(layer)
            ),
        ))
    });
    r.register_with_param("PSROIPooling", PSROI_POOLING_FIELD, |p| {
        Ok(Box::new(PsRoiPoolingLayer::from_param(p)?))
    })?;
    r.register_with_param("Reorg", REORG_FIELD, |p| {
        Ok(Box::new(ReorgLayer::from_param(p)?))
    })?;
    r.register_with_param("YoloDetectionOutput", YOLO_DETECTION_OUTPUT_FIELD, |p| {
        let (decoder, param) = YoloV2::from_param(p)?;
        Ok(Box::new(YoloDetectionOutputLayer::new(decoder, &param)?))
    })?;
    r.register_with_param(
        "Yolov3DetectionOutput",
        YOLOV3_DETECTION_OUTPUT_FIELD,
        |p| {
            let (decoder, param) = YoloV3::from_param(p)?;
            Ok(Box::new(YoloDetectionOutputLayer::new(decoder, &param)?))
        },
    )?;
    r.register_with_param("Yolov3", YOLOV3_FIELD, |p| {
        Ok(Box::new(Yolov3LossLayer::from_param(p)?))
    })?;
    r.register_with_param("RegionLoss", REGION_LOSS_FIELD, |p| {
        Ok(Box::new(RegionLossLayer::from_param(p)?))
    })?;
    r.register_with_param("YoloSeg", YOLO_SEG_FIELD, |p| {
        Ok(Box::new(YoloSegLayer::from_param(p)?))
    })?;
    r.register_with_param("SegmentationEvaluate", SEGMENTATION_EVALUATE_FIELD, |p| {
        Ok(Box::new(SegmentationEvaluateLayer::from_param(p)?))
    })?;
    r.register("AssistedExcitation", |p| {
        Ok(Box::new(AssistedExcitationLayer::from_param(p)?))
    });
    r.register("Axpy", |_| Ok(Box::new(AxpyLayer)));
    r.register("ReLU6", |p| Ok(Box::new(NeuronLayer::from_param(p)?)));
    for depthwise in ["DepthwiseConvolution", "ConvolutionDepthwise"] {
        r.register(depthwise, |p| {
            Ok(Box::new(ConvolutionLayer::<T>::from_param(
                &depthwise_as_grouped(p),
            )?))
        });
    }
    Ok(())
}

/// The depthwise forks' layers (yonghenglh6/DepthwiseConvolution,
/// ConvolutionDepthwise of the MobileNet-YOLO and SSD ports) are
/// convolutions of one input channel per output: Caffe's grouped
/// convolution, `group` = `num_output` where the prototxt leaves it out.
fn depthwise_as_grouped(layer: &ParamMessage) -> ParamMessage {
    let mut grouped = layer.clone();
    let conv = grouped.message_mut("convolution_param");
    if !conv.has("group") {
        let outputs = conv.uint("num_output");
        conv.set("group", ParamValue::UInt(outputs));
    }
    grouped
}
