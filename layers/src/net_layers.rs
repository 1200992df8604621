//! The built-in layer types under Caffe's names: one line each, the
//! layer's code in its own folder.

use blob_runtime::MathElement;

use crate::activation::{ActivationLayer, Hyperbolic, Logistic, Rectify};
use crate::argmax::ArgMaxLayer;
use crate::batch_norm::BatchNormLayer;
use crate::batch_reindex::BatchReindexLayer;
use crate::concat::ConcatLayer;
use crate::conv::ConvolutionLayer;
use crate::crop::CropLayer;
use crate::deconv::DeconvolutionLayer;
use crate::detection_evaluate::DetectionEvaluateLayer;
use crate::detection_output::DetectionOutputLayer;
use crate::dropout::DropoutLayer;
use crate::dummy_data::DummyDataLayer;
use crate::dyn_layer::sub_param;
use crate::eltwise::EltwiseLayer;
use crate::embed::EmbedLayer;
use crate::filter::FilterLayer;
use crate::flatten::FlattenLayer;
use crate::im2col::Im2colLayer;
use crate::inner_product::InnerProductLayer;
use crate::input::InputLayer;
use crate::loss::{
    ContrastiveLoss, EuclideanLoss, HingeLoss, InfogainLossLayer, LossLayer,
    MultinomialLogisticLoss, SigmoidCrossEntropyLoss,
};
use crate::lrn::LrnLayer;
use crate::multibox_loss::MultiBoxLossLayer;
use crate::mvn::MvnLayer;
use crate::neuron::NeuronLayer;
use crate::normalize::NormalizeLayer;
use crate::parameter::ParameterLayer;
use crate::permute::PermuteLayer;
use crate::pool::PoolingLayer;
use crate::prelu::PReLULayer;
use crate::prior_box::PriorBoxLayer;
use crate::recurrent::{LstmUnitLayer, RecurrentLayer};
use crate::reduction::ReductionLayer;
use crate::registry::LayerRegistry;
use crate::reshape::ReshapeLayer;
use crate::scale::{BiasLayer, ScaleLayer};
use crate::silence::SilenceLayer;
use crate::slice::SliceLayer;
use crate::softmax::{AccuracyLayer, SoftmaxLayer, SoftmaxWithLossLayer};
use crate::split::SplitLayer;
use crate::spp::SppLayer;
use crate::tile::TileLayer;

/// The data layers a net built here reads as inputs its caller fills.
pub(crate) const DATA_LAYERS: [&str; 7] = [
    "Data",
    "ImageData",
    "HDF5Data",
    "MemoryData",
    "WindowData",
    "AnnotatedData",
    "LaneData",
];

pub(crate) fn register_all<T: MathElement>(r: &mut LayerRegistry<T>) {
    r.register("Input", |p| Ok(Box::new(InputLayer::from_param(p)?)));
    for kind in DATA_LAYERS {
        r.register(kind, |p| Ok(Box::new(InputLayer::data_layer(p)?)));
    }
    r.register("DummyData", |p| {
        Ok(Box::new(DummyDataLayer::from_param(p)?))
    });
    r.register("Split", |_| Ok(Box::new(SplitLayer)));
    r.register("Convolution", |p| {
        Ok(Box::new(ConvolutionLayer::<T>::from_param(p)?))
    });
    r.register("Deconvolution", |p| {
        Ok(Box::new(DeconvolutionLayer::<T>::from_param(p)?))
    });
    r.register("Pooling", |p| Ok(Box::new(PoolingLayer::from_param(p)?)));
    r.register("InnerProduct", |p| {
        Ok(Box::new(InnerProductLayer::<T>::from_param(p)?))
    });
    r.register("ReLU", |p| {
        if sub_param(p, "relu_param").float("negative_slope") != 0.0 {
            return Ok(Box::new(NeuronLayer::from_param(p)?));
        }
        Ok(Box::new(ActivationLayer::<Rectify>::new()))
    });
    for kind in [
        "AbsVal",
        "Power",
        "ELU",
        "BNLL",
        "Exp",
        "Log",
        "Threshold",
        "Clip",
        "Swish",
    ] {
        r.register(kind, |p| Ok(Box::new(NeuronLayer::from_param(p)?)));
    }
    r.register("Sigmoid", |_| {
        Ok(Box::new(ActivationLayer::<Logistic>::new()))
    });
    r.register("TanH", |_| {
        Ok(Box::new(ActivationLayer::<Hyperbolic>::new()))
    });
    r.register("PReLU", |p| Ok(Box::new(PReLULayer::<T>::from_param(p)?)));
    r.register("Softmax", |p| Ok(Box::new(SoftmaxLayer::from_param(p))));
    r.register("LRN", |p| Ok(Box::new(LrnLayer::<T>::from_param(p)?)));
    r.register("Crop", |p| Ok(Box::new(CropLayer::from_param(p))));
    r.register("ArgMax", |p| Ok(Box::new(ArgMaxLayer::from_param(p)?)));
    r.register("Normalize", |p| Ok(Box::new(NormalizeLayer::from_param(p))));
    r.register("Permute", |p| Ok(Box::new(PermuteLayer::from_param(p)?)));
    r.register("PriorBox", |p| Ok(Box::new(PriorBoxLayer::from_param(p)?)));
    r.register("DetectionEvaluate", |p| {
        Ok(Box::new(DetectionEvaluateLayer::from_param(p)?))
    });
    r.register("DetectionOutput", |p| {
        Ok(Box::new(DetectionOutputLayer::from_param(p)?))
    });
    r.register("MultiBoxLoss", |p| {
        Ok(Box::new(MultiBoxLossLayer::from_param(p)?))
    });
    r.register("SoftmaxWithLoss", |p| {
        Ok(Box::new(SoftmaxWithLossLayer::<T>::from_param(p)))
    });
    r.register("Accuracy", |p| Ok(Box::new(AccuracyLayer::from_param(p)?)));
    r.register("Silence", |_| Ok(Box::new(SilenceLayer)));
    r.register("Embed", |p| Ok(Box::new(EmbedLayer::<T>::from_param(p)?)));
    r.register("BatchReindex", |_| Ok(Box::new(BatchReindexLayer)));
    r.register("Filter", |p| Ok(Box::new(FilterLayer::from_param(p))));
    r.register("Parameter", |p| {
        Ok(Box::new(ParameterLayer::<T>::from_param(p)?))
    });
    r.register("Tile", |p| Ok(Box::new(TileLayer::from_param(p)?)));
    r.register("Im2col", |p| Ok(Box::new(Im2colLayer::from_param(p)?)));
    r.register("SPP", |p| Ok(Box::new(SppLayer::from_param(p)?)));
    r.register("LSTM", |p| Ok(Box::new(RecurrentLayer::<T>::lstm(p)?)));
    r.register("RNN", |p| Ok(Box::new(RecurrentLayer::<T>::rnn(p)?)));
    r.register("LSTMUnit", |_| Ok(Box::new(LstmUnitLayer)));
    r.register("Reduction", |p| Ok(Box::new(ReductionLayer::from_param(p))));
    r.register("MVN", |p| Ok(Box::new(MvnLayer::from_param(p))));
    r.register("EuclideanLoss", |_| {
        Ok(Box::new(LossLayer::new(EuclideanLoss)))
    });
    r.register("SigmoidCrossEntropyLoss", |p| {
        Ok(Box::new(LossLayer::new(
            SigmoidCrossEntropyLoss::from_param(p),
        )))
    });
    r.register("HingeLoss", |p| {
        Ok(Box::new(LossLayer::new(HingeLoss::from_param(p))))
    });
    r.register("ContrastiveLoss", |p| {
        Ok(Box::new(LossLayer::new(ContrastiveLoss::from_param(p))))
    });
    r.register("InfogainLoss", |p| {
        Ok(Box::new(InfogainLossLayer::<T>::from_param(p)?))
    });
    r.register("MultinomialLogisticLoss", |_| {
        Ok(Box::new(LossLayer::new(MultinomialLogisticLoss)))
    });
    r.register("Concat", |p| Ok(Box::new(ConcatLayer::from_param(p)?)));
    r.register("Slice", |p| Ok(Box::new(SliceLayer::from_param(p)?)));
    r.register("Flatten", |p| Ok(Box::new(FlattenLayer::from_param(p))));
    r.register("Reshape", |p| Ok(Box::new(ReshapeLayer::from_param(p)?)));
    r.register("Eltwise", |p| {
        Ok(Box::new(EltwiseLayer::<T>::from_param(p)?))
    });
    r.register("BatchNorm", |p| {
        Ok(Box::new(BatchNormLayer::<T>::from_param(p)?))
    });
    r.register("Scale", |p| Ok(Box::new(ScaleLayer::<T>::from_param(p)?)));
    r.register("Bias", |p| Ok(Box::new(BiasLayer::<T>::from_param(p)?)));
    r.register("Dropout", |p| Ok(Box::new(DropoutLayer::from_param(p)?)));
    crate::fork_layers::register_forks(r)
        .expect("the forks' fields are distinct from caffe.proto's and each other's");
}
