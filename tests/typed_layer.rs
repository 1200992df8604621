//! Layers written with typed blobs (`TypedLayer`): in a typed net without
//! registration, in a `.prototxt` after one `register_typed` call (their
//! parameter message included, the spec's text read back to the same
//! net), at several shapes under one type name, with two tops, under the
//! gradient checker in f64, and refused by name when a blob has another
//! shape.

use blobflow::layers::check::GradientChecker;
use blobflow::layers::net::{Net, NetState, Phase};
use blobflow::layers::registry::LayerRegistry;
use blobflow::layers::solver::{LrPolicy, SgdSolver};
use blobflow::layers::typed_layer::{DynTyped, TypedLayer};
use blobflow::layers::typed_net::*;
use blobflow::prelude::*;
use blobflow::proto::ParamMessage;
use blobflow::proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blobflow::runtime::MathElement;
use blobflow::typed::TypedBlob;

type Result<T> = std::result::Result<T, BlobError>;
type Rows<const C: usize> = (Dyn, D<C>);

/// `gain_param { init: .. }`: the value the gains start at.
static GAIN_PARAM: MessageSchema = MessageSchema {
    name: "GainParameter",
    fields: &[
        FieldSchema::optional("init", 1, FieldKind::Float).with_default(FieldDefault::Float(1.0))
    ],
};

/// `y[n, c] = x[n, c] * g[c]`, `g` learned, for f32 and f64.
struct Gain<const C: usize> {
    init: f64,
}

impl<T: MathElement, const C: usize> TypedLayer<T> for Gain<C> {
    const TYPE: &'static str = "Gain";
    const PARAM_FIELD: Option<FieldSchema> = Some(FieldSchema::optional(
        "gain_param",
        7001,
        FieldKind::Message(&GAIN_PARAM),
    ));
    type Bottoms = (Rows<C>,);
    type Tops = (Rows<C>,);
    type Params = ((D<C>,),);

    fn from_param(param: &ParamMessage) -> Result<Self> {
        let init = param.message("gain_param").map_or(1.0, |p| p.float("init"));
        Ok(Gain { init })
    }

    fn write_fields(&self, text: &mut String) {
        text.push_str(&format!("gain_param {{ init: {} }}", self.init));
    }

    fn init_params(&mut self, (g,): (&TypedBlob<T, (D<C>,)>,)) -> Result<()> {
        g.mutable_cpu_data()?.fill(T::from_f64(self.init));
        Ok(())
    }

    fn forward(
        &mut self,
        (x,): (&TypedBlob<T, Rows<C>>,),
        (y,): (&TypedBlob<T, Rows<C>>,),
        (g,): (&TypedBlob<T, (D<C>,)>,),
    ) -> Result<()> {
        let (xd, gd) = (x.to_vec()?, g.to_vec()?);
        let mut yd = y.mutable_cpu_data()?;
        for n in 0..x.shape()[0] {
            for (c, &g) in gd.iter().enumerate() {
                let at = y.offset([n, c]);
                yd[at] = xd[at] * g;
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        (y,): (&TypedBlob<T, Rows<C>>,),
        down: &[bool],
        (x,): (&TypedBlob<T, Rows<C>>,),
        (g,): (&TypedBlob<T, (D<C>,)>,),
    ) -> Result<()> {
        let (dy, xd, gd) = (y.diff_to_vec()?, x.to_vec()?, g.to_vec()?);
        {
            let mut dg = g.mutable_cpu_diff()?;
            for (i, (&d, &v)) in dy.iter().zip(&xd).enumerate() {
                dg[i % C] += d * v;
            }
        }
        if down[0] {
            let mut dx = x.mutable_cpu_diff()?;
            for (i, &d) in dy.iter().enumerate() {
                dx[i] = d * gd[i % C];
            }
        }
        Ok(())
    }
}

/// Two tops: the positive and the negative part of its bottom.
struct Signs<const C: usize>;

impl<const C: usize> TypedLayer<f32> for Signs<C> {
    const TYPE: &'static str = "Signs";
    type Bottoms = (Rows<C>,);
    type Tops = (Rows<C>, Rows<C>);
    type Params = ();

    fn from_param(_: &ParamMessage) -> Result<Self> {
        Ok(Signs)
    }

    fn forward(
        &mut self,
        (x,): (&TypedBlob<f32, Rows<C>>,),
        (pos, neg): (&TypedBlob<f32, Rows<C>>, &TypedBlob<f32, Rows<C>>),
        (): (),
    ) -> Result<()> {
        let xd = x.to_vec()?;
        let (mut p, mut m) = (pos.mutable_cpu_data()?, neg.mutable_cpu_data()?);
        for (i, v) in xd.into_iter().enumerate() {
            (p[i], m[i]) = (v.max(0.0), (-v).max(0.0));
        }
        Ok(())
    }

    fn backward(
        &mut self,
        (pos, neg): (&TypedBlob<f32, Rows<C>>, &TypedBlob<f32, Rows<C>>),
        down: &[bool],
        (x,): (&TypedBlob<f32, Rows<C>>,),
        (): (),
    ) -> Result<()> {
        if down[0] {
            let (xd, dp, dm) = (x.to_vec()?, pos.diff_to_vec()?, neg.diff_to_vec()?);
            let mut dx = x.mutable_cpu_diff()?;
            for i in 0..xd.len() {
                dx[i] = if xd[i] > 0.0 { dp[i] } else { -dm[i] };
            }
        }
        Ok(())
    }
}

blob!(pub shape Features = _, 4);
blob!(pub shape Wide = _, 6);
blob!(pub shape Classes = _);

fn fill(blob: &Blob<f32>, step: f32) -> Result<()> {
    for (i, v) in blob.mutable_cpu_data()?.iter_mut().enumerate() {
        *v = ((i as f32) * step).sin();
    }
    Ok(())
}

/// Gains at two widths, one of them after a two-top layer, into a loss.
fn declare() -> (NetSpec<f32>, Top<f32, Rows<4>>, Top<f32, Rows<4>>) {
    let mut n = NetSpec::<f32>::new("gains");
    let x = n.input::<Features>("x");
    let w = n.input::<Wide>("w");
    let label = n.input::<Classes>("label");
    let gx = n.add_typed("gain4", &x, Gain::<4> { init: 2.0 });
    let gw = n.add_typed("gain6", &w, Gain::<6> { init: 0.5 });
    let (pos, neg) = n.add_typed("signs", &gx, Signs::<4>);
    let ip = n.add(
        "ip",
        &gw,
        Fc::<4>::new().weight_filler(Filler::constant(0.1)),
    );
    let sum = n.add("sum", (&pos, &ip), Eltwise::sum());
    let _loss = n.add("loss", (&sum, &label), SoftmaxLoss::new());
    n.batch(3);
    (n, pos, neg)
}

#[test]
fn a_typed_net_runs_its_typed_layers_without_registration() -> Result<()> {
    let (n, pos, neg) = declare();
    let mut net = n.build(NetState::train())?;
    assert_eq!(net.layer_blobs("gain4").unwrap()[0].to_vec()?, [2.0; 4]);
    assert_eq!(net.layer_blobs("gain6").unwrap()[0].to_vec()?, [0.5; 6]);
    assert_eq!(neg.name(), "signs_1");
    fill(net.blob("x").unwrap(), 0.7)?;
    fill(net.blob("w").unwrap(), 0.3)?;
    net.blob("label")
        .unwrap()
        .mutable_cpu_data()?
        .copy_from_slice(&[0.0, 1.0, 3.0]);
    let first = net.forward()?;
    let x = net.blob("x").unwrap().to_vec()?;
    let (p, m) = (pos.blob(&net)?, neg.blob(&net)?);
    for (i, &v) in x.iter().enumerate() {
        let (item, c) = (i / 4, i % 4);
        assert_eq!(p.data_at([item, c]), (2.0 * v).max(0.0));
        assert_eq!(m.data_at([item, c]), (-2.0 * v).max(0.0));
    }
    // Training moves the typed layers' parameters, and the loss falls.
    let mut solver = SgdSolver::new(0.5, LrPolicy::Fixed);
    for _ in 0..20 {
        net.clear_param_diffs()?;
        net.forward()?;
        net.backward()?;
        solver.step(&net.param_blobs(), &net.param_specs())?;
    }
    assert_ne!(net.layer_blobs("gain6").unwrap()[0].to_vec()?, [0.5; 6]);
    let last = net.forward()?;
    assert!(last < first * 0.5, "loss {first} -> {last}");
    Ok(())
}

#[test]
fn the_specs_prototxt_reads_back_after_one_registration_each() -> Result<()> {
    let (n, _, _) = declare();
    let text = n.to_prototxt();
    assert!(text.contains("gain_param { init: 2 }"), "{text}");
    let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    registry.register_typed::<Gain<4>>()?;
    registry.register_typed::<Gain<6>>()?;
    registry.register_typed::<Signs<4>>()?;
    let read = Net::<f32>::builder()
        .registry(&registry)
        .from_prototxt(&text)?;
    let built = n.build(NetState::test())?;
    for net in [&read, &built] {
        fill(net.blob("x").unwrap(), 0.7)?;
        fill(net.blob("w").unwrap(), 0.3)?;
    }
    let (mut read, mut built) = (read, built);
    read.forward()?;
    built.forward()?;
    for blob in ["gain4", "gain6", "signs", "signs_1", "sum"] {
        assert_eq!(
            read.blob(blob).unwrap().to_vec()?,
            built.blob(blob).unwrap().to_vec()?,
            "{blob}"
        );
    }
    // Without the registration its parameter message is unknown, by line.
    let err = Net::<f32>::from_prototxt(&text, NetState::test())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("line 7") && err.contains("no field named gain_param"),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_typed_layer_in_one_phase_is_left_out_of_the_other() -> Result<()> {
    let mut n = NetSpec::<f32>::new("phases");
    let x = n.input::<Features>("x");
    let _gain = n.add_typed_in(Phase::Test, "gain", &x, Gain::<4> { init: 3.0 });
    let test = n.batch(1).build(NetState::test())?;
    let train = n.build(NetState::train())?;
    assert!(test.layer_blobs("gain").is_some());
    assert!(train.layer_blobs("gain").is_none());
    assert!(n.to_prototxt().contains("include { phase: TEST }"));
    Ok(())
}

#[test]
fn a_blob_of_another_shape_is_refused_naming_layer_blob_and_shapes() -> Result<()> {
    let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    registry.register_typed::<Gain<4>>()?;
    let err = Net::<f32>::builder()
        .registry(&registry)
        .from_prototxt(
            "input: 'x' input_shape { dim: 2 dim: 5 }
             layer { name: 'g' type: 'Gain' bottom: 'x' top: 'y' gain_param { init: 3 } }",
        )
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("layer 'g' (Gain)")
            && err.contains("bottom 0 has shape 2 5 (10), but Gain<4> takes _ 4"),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_typed_layer_passes_the_gradient_checker_in_f64() -> Result<()> {
    let x = Blob::<f64>::from_vec(&[3, 4], (0..12).map(|i| (i as f64 - 5.0) / 3.0).collect())?;
    let mut layer = DynTyped::new(Gain::<4> { init: 1.5 })?;
    let report = GradientChecker::default().check(&mut layer, &[x])?;
    // 12 inputs and 4 gains, each against central differences.
    assert_eq!(report.checked, 16);
    assert!(report.worst < 1e-6, "{}", report.worst);
    Ok(())
}

#[test]
fn a_handle_reads_its_blob_typed_and_says_when_the_net_moved_away() -> Result<()> {
    let (n, pos, _) = declare();
    let mut net = n.build(NetState::test())?;
    let p = pos.blob(&net)?;
    assert_eq!(p.offset([2, 3]), 11);
    net.blob_mut("x").unwrap().reshape(&[3, 5])?;
    let err = net.reshape().err().unwrap().to_string();
    assert!(err.contains("Gain<4> takes _ 4"), "{err}");
    Ok(())
}
