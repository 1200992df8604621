//! # Typed blobs
//!
//! A shape can be a type. `blob!(f32; 64, 3, 32, 32)` is the type of a blob
//! of that shape: its count, strides and offsets are constants, and
//! operations between blobs check their shapes when the program compiles.
//! Underneath is the same [`Blob`](crate::Blob) and `SyncedMemory`: every
//! runtime method works (through `Deref`), and [`TypedBlob::into_dyn`] is
//! free.
//!
//! ```
//! use blobflow::{blob, typed::*};
//!
//! blob!(pub shape Conv1Out = n: 64, c: 20, h: 24, w: 24);
//! blob!(pub shape Conv1Flat = 64, 11520);
//!
//! type Input = blob!(f32; _, 1, 28, 28); // batch known at run time
//! let x = Input::with_dynamic(64)?;
//! assert_eq!(x.shape(), &[64, 1, 28, 28]);
//!
//! let c = TypedBlob::<f32, Conv1Out>::new()?;
//! // A count is offered only where every dim is static; a dynamic shape
//! // has ITEM_COUNT, the count of one item along its dynamic axis.
//! assert_eq!(TypedBlob::<f32, Conv1Out>::COUNT, 64 * 20 * 24 * 24);
//! assert_eq!(Input::ITEM_COUNT, 28 * 28);
//! // Axis indices and dim values have names that say which.
//! assert_eq!((Conv1Out::AXIS_C, Conv1Out::DIM_C), (1, 20));
//! const OFF: usize = <blob!(f32; 64, 20, 24, 24)>::static_offset(&[1, 2, 3, 4]);
//! assert_eq!(c.offset([1, 2, 3, 4]), OFF);
//! // reshape checks the counts at compile time, of any size.
//! let flat: TypedBlob<f32, Conv1Flat> = c.reshape();
//! let flat: blob!(f32; 64, 11520) = flat.reshape();
//!
//! // Dims can be constants, const expressions and, in generic code, type
//! // parameters with arithmetic on them: a 5x5 valid convolution's output.
//! const CLASSES: usize = 10;
//! type Logits = blob!(f32; _, CLASSES);
//! fn conv5_out<N: Dim, C: Dim, H: Dim, W: Dim>(
//!     _x: &blob!(f32; N, C, H, W),
//! ) -> Result<blob!(f32; N, C, H - 4, W - 4), blobflow::BlobError>
//! where
//!     H: DimSub<D<4>>,
//!     W: DimSub<D<4>>,
//! {
//!     TypedBlob::from_shape(&[2, 3, 24, 24])
//! }
//! let y = conv5_out(&<blob!(f32; 2, 3, 28, 28)>::new()?)?;
//! assert_eq!(y.shape(), &[2, 3, 24, 24]);
//! # let _ = (flat, Logits::with_dynamic(1)?);
//! # Ok::<(), blobflow::BlobError>(())
//! ```
//!
//! ## Nets, wired by construction
//!
//! A net is declared with a [`NetSpec`](crate::layers::typed_net::NetSpec):
//! each input and each layer added gives back a typed handle
//! ([`Top`](crate::layers::typed_net::Top)) on its blob, and a layer
//! takes the handles of its bottoms, so (bottom, top) pairs are never
//! written, a layer cannot read its own output, and backward runs in the
//! reverse order by itself. The compiler computes each output shape from
//! the bottoms' (convolution and pooling arithmetic, the axis Concat joins
//! adding up) and refuses what cannot be wired. What comes out is Caffe's
//! `Net` of run-time layers, the one a `.prototxt` builds: named blobs,
//! parameters with the `lr_mult`/`decay_mult` declared beside the layer,
//! the solvers, `.caffemodel`s by layer name, reshaping, devices, and
//! `caffe time`'s per-layer timing (`Net::time`).
//!
//! A handle passed by value lets a layer that can run in place (ReLU,
//! Dropout, BatchNorm, Scale) write over the blob, as Caffe's prototxts
//! do; a clone of the handle keeps the blob readable by another layer (a
//! branch), and the layer then writes a blob of its own.
//!
//! ```
//! use blobflow::layers::net::{NetState, Phase};
//! use blobflow::layers::typed_net::*;
//! use blobflow::blob;
//!
//! blob!(pub shape Images = _, 3, 32, 32);
//! blob!(pub shape Classes = _);
//!
//! // cifar10_quick, with a PReLU where Caffe has relu1.
//! let mut n = NetSpec::<f32>::new("CIFAR10_quick");
//! let data = n.input::<Images>("data");
//! let label = n.input::<Classes>("label");
//! let gauss = |std| Filler::gaussian(0.0, std);
//! let (w, b) = (Mult::new(1.0, 1.0), Mult::new(2.0, 0.0));
//! let x = n.add("conv1", &data, Conv::<32, 5, 1, 2>::new().mults(w, b).weight_filler(gauss(1e-4)));
//! let x = n.add("pool1", &x, Pool::<3, 2>::max());
//! let x = n.add("prelu1", x, PReLU::new());
//! let x = n.add("conv2", &x, Conv::<32, 5, 1, 2>::new().weight_filler(gauss(0.01)));
//! let x = n.add("relu2", x, Neuron::relu());
//! let x = n.add("pool2", &x, Pool::<3, 2>::ave());
//! let x = n.add("conv3", &x, Conv::<64, 5, 1, 2>::new().weight_filler(gauss(0.01)));
//! let x = n.add("relu3", x, Neuron::relu());
//! let x = n.add("pool3", &x, Pool::<3, 2>::ave());
//! let x = n.add("ip1", &x, Fc::<64>::new().weight_filler(gauss(0.1)));
//! let scores = n.add("ip2", &x, Fc::<10>::new().weight_filler(gauss(0.1)));
//! let _accuracy = n.add_in(Phase::Test, "accuracy", (&scores, &label), Accuracy::top(1));
//! let loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
//!
//! let mut net = n.batch(4).build(NetState::train())?;
//! net.forward()?;
//! net.backward()?; // the diffs of every parameter, for a solver's step
//! assert_eq!(net.blob("pool3").unwrap().shape(), &[4, 64, 4, 4]);
//! assert_eq!(loss.blob(&net)?.count(), 1);
//! // One spec serves any batch: reshape the inputs and the net follows.
//! net.blob_mut("data").unwrap().reshape(&[1, 3, 32, 32])?;
//! net.blob_mut("label").unwrap().reshape(&[1])?;
//! net.reshape()?;
//! assert_eq!(scores.blob(&net)?.shape(), &[1, 10]);
//! # Ok::<(), blobflow::BlobError>(())
//! ```
//!
//! Shapes are compared by their dims: a handle takes a declared name of
//! the same dims with `top.named::<Conv2Out>()`. Your own layer type gets
//! a [`LayerSpec`](crate::layers::typed_net::LayerSpec) (its Caffe type,
//! output shape and fields) and a constructor in a `LayerRegistry` passed
//! to `build_with`. Repeated blocks (a ResNet bottleneck, an inception
//! module) are a `macro_rules!` that adds their layers:
//! `tests/typed_models.rs` declares ResNet-50 and GoogLeNet so.
//!
//! Branches join and split on any axis of bottoms of 2 to 4 axes:
//! `Concat` on the channels (Caffe's default), `ConcatAxis::<AXIS>`
//! elsewhere (SSD's prior boxes on axis 2), `n.slice::<POINT, _>` and
//! `n.slice_axis::<AXIS, POINT, _>` into two tops; the joined or split
//! dims are computed at compile time.
//!
//! ```
//! use blobflow::layers::typed_net::*;
//! blobflow::blob!(pub shape Near = 1, 2, 64);
//! blobflow::blob!(pub shape Far = 1, 2, 16);
//! let mut n = NetSpec::<f32>::new("priors");
//! let (near, far) = (n.input::<Near>("near"), n.input::<Far>("far"));
//! let priors: Top<f32, (D<1>, D<2>, D<80>)> = n.add("priors", (&near, &far), ConcatAxis::<2>);
//! let (first, rest) = n.slice_axis::<2, 64, _>("again", &priors, ["first", "rest"]);
//! let _: (Top<f32, Near>, Top<f32, Far>) = (first.named(), rest.named());
//! ```
//!
//! ## Layers of your own
//!
//! A layer written with typed blobs is a
//! [`TypedLayer`](crate::layers::typed_layer::TypedLayer): it declares
//! the shapes of its bottoms, tops and parameter blobs as types (built
//! from its const parameters, `_` for the batch), its Caffe type name,
//! and how it is read from and written to its `LayerParameter`; its
//! Forward and Backward (adding into its parameters' diffs, as Caffe
//! does) get the net's blobs as [`TypedBlob`]
//! views of those shapes: compile-time strides, `offset`, `data_at`,
//! the CPU and GPU guards. Before each pass every blob is checked
//! against its declared shape, so the layer's math never sees another;
//! a mismatch is an error naming the layer, the blob and both shapes.
//!
//! In a typed net, `NetSpec::add_typed` checks the bottoms at compile
//! time and needs no registration; a `.prototxt` naming the type reads
//! it after one `LayerRegistry::register_typed::<L>()` call (several
//! instances, `Gain<16>` and `Gain<32>`, may share a type name: the
//! bottoms' shapes pick). [`DynTyped`](crate::layers::typed_layer::DynTyped)
//! runs it as a [`DynLayer`](crate::layers::DynLayer), Caffe's `Layer`
//! at run time, which is what
//! [`GradientChecker`](crate::layers::check::GradientChecker) holds to
//! central differences.
//!
//! ```
//! use blobflow::layers::check::GradientChecker;
//! use blobflow::layers::net::NetState;
//! use blobflow::layers::typed_layer::{DynTyped, TypedLayer};
//! use blobflow::layers::typed_net::*;
//! use blobflow::proto::ParamMessage;
//! use blobflow::typed::TypedBlob;
//! use blobflow::{Blob, BlobError, blob};
//!
//! type Rows<const C: usize> = (Dyn, D<C>);
//!
//! /// y = x * gamma per channel of (N, C), gamma learned (Caffe's Scale,
//! /// one axis).
//! struct ChannelScale<const C: usize>;
//!
//! impl<const C: usize> TypedLayer<f32> for ChannelScale<C> {
//!     const TYPE: &'static str = "ChannelScale";
//!     type Bottoms = (Rows<C>,);
//!     type Tops = (Rows<C>,);
//!     type Params = ((D<C>,),);
//!
//!     fn from_param(_: &ParamMessage) -> Result<Self, BlobError> {
//!         Ok(ChannelScale)
//!     }
//!     fn init_params(&mut self, (g,): (&TypedBlob<f32, (D<C>,)>,)) -> Result<(), BlobError> {
//!         g.mutable_cpu_data()?.fill(1.0);
//!         Ok(())
//!     }
//!     fn forward(
//!         &mut self,
//!         (x,): (&TypedBlob<f32, Rows<C>>,),
//!         (y,): (&TypedBlob<f32, Rows<C>>,),
//!         (g,): (&TypedBlob<f32, (D<C>,)>,),
//!     ) -> Result<(), BlobError> {
//!         let (xd, gd) = (x.cpu_data()?, g.cpu_data()?);
//!         let mut yd = y.mutable_cpu_data()?;
//!         for n in 0..x.shape()[0] {
//!             for c in 0..C {
//!                 yd[y.offset([n, c])] = xd[x.offset([n, c])] * gd[c];
//!             }
//!         }
//!         Ok(())
//!     }
//!     fn backward(
//!         &mut self,
//!         (y,): (&TypedBlob<f32, Rows<C>>,),
//!         down: &[bool],
//!         (x,): (&TypedBlob<f32, Rows<C>>,),
//!         (g,): (&TypedBlob<f32, (D<C>,)>,),
//!     ) -> Result<(), BlobError> {
//!         let (xd, dy, gd) = (x.to_vec()?, y.diff_to_vec()?, g.to_vec()?);
//!         let mut dg = g.mutable_cpu_diff()?;
//!         for i in 0..dy.len() {
//!             dg[i % C] += dy[i] * xd[i];
//!         }
//!         if down[0] {
//!             for (i, d) in x.mutable_cpu_diff()?.iter_mut().enumerate() {
//!                 *d = dy[i] * gd[i % C];
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! // Held to central differences.
//! let x = Blob::from_vec(&[2, 3], vec![0.5, -1.0, 2.0, 1.5, -0.5, 1.0])?;
//! let report = GradientChecker::default().check(&mut DynTyped::new(ChannelScale::<3>)?, &[x])?;
//! assert_eq!(report.checked, 6 + 3);
//!
//! blob!(pub shape Features = _, 4);
//! let mut n = NetSpec::<f32>::new("scaled");
//! let x = n.input::<Features>("x");
//! let h = n.add("ip", &x, Fc::<3>::new().weight_filler(Filler::xavier()));
//! // ChannelScale::<4> here, or `&x`: a compile error naming both shapes.
//! let y = n.add_typed("scale", &h, ChannelScale::<3>);
//! let mut net = n.batch(2).build(NetState::test())?;
//! net.forward()?;
//! assert_eq!(y.blob(&net)?.to_vec()?, h.blob(&net)?.to_vec()?); // gamma starts at 1
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A layer whose shapes follow no fixed rule (a convolution's output
//! size from its parameters at run time) is a `DynLayer` with a
//! [`LayerSpec`](crate::layers::typed_net::LayerSpec) for typed nets:
//! its Caffe type and output shape as a function of the input's, bounds
//! on the input making a wrong one a compile error; the built-in layers
//! are declared so.
//!
//! The `user_layer` example trains a net with a typed layer in it, and
//! gives the layer a CUDA side as the built-in layers have one (feature
//! `cuda`): a kernel in a `.cu` file beside the code, a typed launcher
//! declared with `blobflow::kernels::cuda_kernels!`, and a branch at the
//! top of `forward`/`backward` taken when the blobs all live on one CUDA
//! device (`blob.device()` and `runtime::cuda::CudaBackend::of`, the same
//! ordinal for each: a kernel cannot read another GPU's memory), reading
//! their device memory with `runtime::cuda::view`. `Net::to_device` moves
//! its blobs with the net's. Its run on a GPU is `user_layer --device
//! cuda`; `tests/cuda-on-cpu` runs its kernel on the CPU against the
//! layer's CPU arithmetic.
//!
//! On a GPU a layer's work is queued and the host goes on: it waits for
//! the device only where a value must reach it, a host read of a blob
//! that lives there (`cpu_data`, `to_vec`) or the loss (`Net::forward`).
//! Uploads do not wait; writing a blob's host side again waits for its
//! last upload. A training loop that reads its loss only when it shows
//! it, as `user_layer` does and as Caffe's `display` interval would,
//! never holds the GPU back between (`Net::forward_unread` is the net's
//! pass without the read, `Net::loss` the read); one that reads it every
//! step reads it last, once the update is queued too (`Trainer::step`
//! does), so the device has the whole step before the host waits.
//!
//! ## Training
//!
//! A net's learnable blobs (`Net::param_blobs`, with their `lr_mult` and
//! `decay_mult` in `Net::param_specs`) go to Caffe's solvers,
//! `layers::solver`: an `SgdSolver` (SGD, Nesterov, AdaGrad, RMSProp,
//! AdaDelta or Adam, with Caffe's rate policies) takes a step from the
//! diffs the backward pass left, where the blobs live. `SolverFile` reads
//! a Caffe solver prototxt into one, and `solve` runs Caffe's whole
//! training loop (test intervals, snapshots, `.solverstate`). Layers add
//! into their parameters' diffs, as in Caffe, so a loop clears them
//! before each backward pass (or lets `iter_size` passes accumulate).
//!
//! ```
//! use blobflow::layers::net::NetState;
//! use blobflow::layers::solver::SolverFile;
//! use blobflow::layers::typed_net::*;
//! use blobflow::blob;
//!
//! blob!(pub shape Features = _, 2);
//! blob!(pub shape Classes = _);
//!
//! let mut n = NetSpec::<f32>::new("two points");
//! let x = n.input::<Features>("x");
//! let label = n.input::<Classes>("label");
//! let scores = n.add("ip", &x, Fc::<2>::new());
//! let _loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
//! let mut net = n.batch(2).build(NetState::train())?;
//! let mut solver = SolverFile::parse("base_lr: 0.5  lr_policy: \"fixed\"  momentum: 0.9")?.solver;
//! // Two points, each of its own class.
//! net.blob("x").unwrap().mutable_cpu_data()?.copy_from_slice(&[1.0, 0.0, 0.0, 1.0]);
//! net.blob("label").unwrap().mutable_cpu_data()?.copy_from_slice(&[0.0, 1.0]);
//! let mut first = None;
//! let mut loss = 0.0;
//! for _ in 0..20 {
//!     net.clear_param_diffs()?;
//!     loss = net.forward()?;
//!     first.get_or_insert(loss);
//!     net.backward()?;
//!     solver.step(&net.param_blobs(), &net.param_specs())?;
//! }
//! assert!(loss < 0.1 * first.unwrap());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What the compiler refuses, and what it says
//!
//! Each relation between shapes is a trait of this crate, and its error
//! names the shapes: by their declared name, or by their dims (`D<64>` is
//! a dim of 64, `Dyn` one known at run time). Where the compiler reports a
//! plain type mismatch, its label carries the two dims. Each row is a case
//! of the compile-fail suite (`tests/ui/fail`, `tests/ui/check`), whose
//! snapshot holds the whole message; a test holds this table to them.
//!
//! | Mistake | First line of the error | Label | Case |
//! |---|---|---|---|
//! | Anonymous shapes that differ (10 vs 100) | `` error[E0308]: mismatched types `` | `` expected `100`, found `10` `` | `anonymous_10_vs_100` |
//! | A generic layer given 16 scales for 32 channels | `` error[E0308]: mismatched types `` | `` expected `32`, found `16` `` | `generic_layer_gamma` |
//! | Height and width swapped in a function argument | `` error[E0308]: mismatched types `` | `` expected `28`, found `32` `` | `swapped_height_width` |
//! | A named constant dim (`CLASSES`) against another size | `` error[E0308]: mismatched types `` | `` expected `10`, found `11` `` | `const_dim_mismatch` |
//! | Reshape to a different count, declared shapes | `` error[E0277]: cannot reshape Conv1Out into FcIn: element counts differ (D<11520> vs D<11521>) `` |  | `reshape_named` |
//! | Reshape to a different count, anonymous shapes | `` error[E0277]: cannot reshape (D<64>, D<3>, D<32>, D<32>) into (D<64>, D<3071>): element counts differ (CountOf<(D<64>, D<3>, D<32>, D<32>)> vs CountOf<(D<64>, D<3071>)>) `` |  | `reshape_count` |
//! | Reshape to a different count past 4096 (AlexNet's pool5 into 9000) | `` error[E0277]: cannot reshape (D<2>, D<256>, D<6>, D<6>) into (D<2>, Thousands<D<9>, D<0>>): element counts differ (CountOf<(D<2>, D<256>, D<6>, D<6>)> vs CountOf<(D<2>, Thousands<D<9>, D<0>>)>) `` | `` element counts differ `` | `reshape_large_count` |
//! | Reshape of a shape with a named constant above 4096 | `` error[E0277]: the element count of (D<2>, D<5000>) is not known at compile time: it has a `D<N>` above 4096 `` | `` element count unknown at compile time `` | `reshape_count_unknown` |
//! | Share memory with a different count | `` error[E0277]: cannot share memory between (D<5>,) and (D<6>,): element counts differ (CountOf<(D<5>,)> vs CountOf<(D<6>,)>) `` |  | `share_data_count` |
//! | Copy between different shapes | `` error[E0277]: shapes differ: (D<3>, D<2>) is not (D<2>, D<3>) `` |  | `copy_shape` |
//! | Copy between different declared shapes | `` error[E0277]: shapes differ: Pool1Out is not Conv2In `` |  | `copy_named` |
//! | `axpy` on different shapes | `` error[E0277]: shapes differ: (D<11>,) is not (D<10>,) `` |  | `axpy_shape` |
//! | Mix f32 and f64 | `` error[E0277]: cannot mix f64 and f32 blobs: element types differ `` |  | `mix_copy` |
//! | Inner product with mismatched K | `` error[E0277]: cannot multiply (D<8>, D<800>) by weights (D<500>, D<801>): K differs (D<800> vs D<801>) `` |  | `inner_product_k` |
//! | Inner product on an image batch not flattened | `` error[E0277]: inner_product multiplies (B, K) inputs, but (D<8>, D<50>, D<4>, D<4>) does not have 2 axes `` | `` not (B, K) `` | `inner_product_rank` |
//! | Inner product, declared shapes | `` error[E0277]: cannot multiply Ip1In by weights Ip2Weights: K differs (D<800> vs D<500>) `` |  | `inner_product_named` |
//! | A helper generic over the input, wrong weights | `` error[E0277]: cannot multiply (Dyn, D<32>) by weights (D<32>, D<16>): K differs (D<32> vs D<16>) `` |  | `ip_helper_wrong_weights` |
//! | Legacy accessors on 5 axes | `` error[E0277]: legacy accessors need at most 4 axes, and (D<1>, D<2>, D<3>, D<4>, D<5>) has more `` |  | `legacy_num` |
//! | `data_at2` on a 3-axis blob | `` error[E0277]: (D<2>, D<3>, D<4>) does not have 2 axes `` |  | `data_at2_wrong_rank` |
//! | A static index out of bounds (reported by `cargo check`) | `` error[E0277]: Idx<2> is out of bounds on Axis<1>, whose dim is D<2> `` |  | `data_at4_out_of_bounds` |
//! | `COUNT` of a shape with a dynamic dim | `` error[E0599]: the associated item `COUNT` exists for struct `TypedBlob<f32, (Dyn, D<3>, D<32>, D<32>)>`, but its trait bounds were not satisfied `` |  | `count_of_dynamic_shape` |
//! | `new()` for a shape with a dynamic dim | `` error[E0277]: (Dyn, D<1>, D<28>, D<28>) has a dynamic dim: make it with `with_dynamic(n)` or `from_shape(..)` `` |  | `new_dynamic` |
//! | Flatten a 1-axis shape | `` error[E0277]: cannot flatten (D<6>,): it needs at least 2 axes, and every axis after the first static with compile-time arithmetic `` |  | `flatten_rank1` |
//! | Flatten over a named constant above 4096 | `` error[E0277]: cannot flatten (Dyn, D<5000>, D<2>): it needs at least 2 axes, and every axis after the first static with compile-time arithmetic `` | `` not flattenable `` | `flatten_constant_above_4096` |
//! | Arithmetic on a generic dim without its bound | `` error[E0277]: W has no compile-time arithmetic `` | `` a generic dim without its bound, a run-time dim or a constant above 4096 `` | `generic_arithmetic_unbounded` |
//! | A float as a dim | `` error: expected a dim: an integer literal (`64`), `_` for a dim known at run time, a constant (`CLASSES`, `{ H - 4 }`), or a type parameter bounded by `Dim` (`K`, `H - 4`) `` |  | `macro_float_dim` |
//! | A batch read at run time written into a type | `` error: `batch` looks like a value known only at run time, and a type's dims are known when the program compiles: write `_` for that dim and give its value when the blob is made (`with_dynamic(batch)`, `from_shape(..)`) `` |  | `macro_runtime_batch` |
//! | Two `_` dims | `` error: at most one dim can be `_` (known at run time): its value is the blob's only run-time dim `` |  | `macro_two_dynamic` |
//! | 33 axes | `` error: a blob has at most 32 axes (Caffe's kMaxBlobAxes); this is axis 33 `` |  | `macro_rank_33` |
//! | A count that overflows `usize` | `` error: the element count overflows usize at this dim `` |  | `macro_count_overflow` |
//! | A residual branch that ends in other channels than its shortcut | `` error[E0277]: Eltwise combines blobs of one shape, but is given Features and (Dyn, D<128>, D<56>, D<56>) `` | `` shapes differ `` | `net_residual_branch` |
//! | An Eltwise of two declared shapes | `` error[E0277]: Eltwise combines blobs of one shape, but is given Wide and Narrow `` | `` shapes differ `` | `net_eltwise_shapes` |
//! | A Concat whose parts differ outside the channel axis | `` error[E0277]: Concat cannot join (Dyn, D<64>, D<28>, D<28>) and (Dyn, D<192>, D<14>, D<14>) on axis 1 `` | `` not equal outside axis 1, or no axis 1 `` | `net_concat_parts` |
//! | A Concat on an axis its bottoms do not have | `` error[E0277]: Concat cannot join Near and Far on axis 3 `` | `` not equal outside axis 3, or no axis 3 `` | `net_concat_axis_past_the_rank` |
//! | One-hot labels to SoftmaxWithLoss | `` error[E0277]: labels OneHot do not fit scores (Dyn, D<10>) (the layer takes the scores first, then the labels) `` | `` not the labels of these scores `` | `net_labels_one_hot` |
//! | A convolution declared on a flat (N, 500) blob | `` error[E0277]: a convolution with kernel 3, stride 1 and pad 0 cannot take Hidden `` | `` needs (N, C, H, W) with static H and W of at least the kernel `` | `net_conv_on_vector` |
//! | A Slice that would leave no channels | `` error[E0277]: Slice cannot split (Dyn, D<8>, D<4>, D<4>) at 8 on axis 1 `` | `` no such split `` | `net_slice_past_the_channels` |
//! | VGG's flattened pool5 (25088) named with a shape of 25000 | `` error[E0277]: shapes differ: Flat<Pool5> is not Fc6In `` | `` expected a blob of shape Fc6In `` | `net_large_named_wrong_dims` |
//! | A typed net's Reshape into another element count | `` error[E0277]: cannot reshape Pool5 into Wrong: element counts differ (D<25088> vs D<25000>) `` | `` element counts differ `` | `net_reshape_count` |
//! | A layer fed its own output (its handle does not exist yet) | `` error[E0425]: cannot find value `conv` in this scope `` | `` not found in this scope `` | `net_fed_its_own_output` |
//! | A blob type where a net wants a shape | `` error[E0277]: TypedBlob<f32, (Dyn, D<8>)> is not a shape `` | `` expected a shape here `` | `net_shape_is_a_blob_type` |
//! | A user's layer that takes (N, C), declared on an image batch | `` error[E0277]: (Dyn, D<8>, D<4>, D<4>) does not have 2 axes `` | `` expected a shape of 2 axes `` | `net_user_layer_wrong_rank` |
//! | A typed layer of 32 channels fed rows of 16 | `` error[E0277]: Gain<32> takes a bottom of shape (blobflow::typed::Dyn, blobflow::typed::D<32>), but is given Features `` | `` expected a bottom of shape (blobflow::typed::Dyn, blobflow::typed::D<32>) `` | `typed_layer_wrong_bottom` |
//! | An f32 net's handle given to a layer of an f64 net | `` error[E0277]: a net of f64 cannot read &Top<f32, Features> `` | `` not handles on f64 blobs `` | `net_mixed_elements` |
//! | SoftmaxWithLoss given (labels, scores) | `` error[E0277]: labels (Dyn, D<10>) do not fit scores Classes (the layer takes the scores first, then the labels) `` | `` not the labels of these scores `` | `net_loss_inputs_swapped` |
//! | A 5x5 convolution on a 4x4 map | `` error[E0277]: no convolution output for D<4> with kernel 5, stride 1, pad 0 and dilation 1 at compile time `` | `` the input is smaller than the kernel, or a dim is dynamic or a constant above 4096 `` | `net_kernel_larger_than_map` |
//! | `.named()` with other dims than the handle's | `` error[E0277]: shapes differ: (Dyn, D<32>, D<24>, D<24>) is not Conv1Out `` | `` expected a blob of shape Conv1Out `` | `net_named_wrong_dims` |
//! | A layer's output no layer reads (a warning; here under `deny(unused_must_use)`) | `` error: unused return value of `blobflow::blob_layers::typed_net::NetSpec::<T>::add` that must be used `` | `` = note: no layer reads this output: it becomes an output of the net (Caffe's rule); bind it (`let _loss = ...`) to keep it so `` | `net_output_unread` |
//!
//! Counts, products (Flatten) and sums (Concat) are computed at compile
//! time for dims of any size (`CountOf<..>` in a message stands for a
//! count). A dim above 4096 prints in thousands: `blob!(f32; _, 25088)` is
//! `(Dyn, Thousands<D<25>, D<88>>)`, and so is VGG's pool5 flattened by
//! the compiler, so the two are one type. The one limit: a *named
//! constant* above 4096 (`const WIDE: usize = 5000; blob!(f32; _, WIDE)`)
//! stays a `D<5000>`, which stable Rust cannot take apart, and has no
//! compile-time arithmetic; write the number instead.

pub use blob_runtime::blob;
pub use blob_runtime::typed::*;
