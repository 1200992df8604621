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
//! // reshape checks the counts at compile time. An anonymous shape's
//! // count is known for dims up to 4096; a declared one's has no limit.
//! let flat: TypedBlob<f32, Conv1Flat> = c.reshape();
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
//! the bottoms' (convolution and pooling arithmetic, Concat's channels
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
//! n.add_in(Phase::Test, "accuracy", (&scores, &label), Accuracy::top(1));
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
//! ## Layers
//!
//! Caffe's layers (`blobflow::layers`) are typed the same way: a layer's
//! type names its input shape, its output shape follows at compile time
//! (`Convolution<f32, Digits, 20, 5>` writes `(_, 20, 24, 24)` for 28x28
//! digits), and its parameters are typed blobs. Your own layer implements
//! the same [`Layer`](crate::layers::Layer) trait: Caffe's Forward and
//! Backward on the blobs, its learnable blobs in `params`; the typed
//! `forward` and `backward` that check the wiring come with it.
//!
//! ```
//! use blobflow::layers::Layer;
//! use blobflow::{Blob, BlobError, blob, typed::TypedBlob};
//!
//! blob!(pub shape Hidden = _, 4);
//!
//! /// y = x * gamma per channel, gamma learned (Caffe's Scale, one axis).
//! struct ChannelScale {
//!     gamma: blob!(f32; 4),
//! }
//!
//! impl Layer for ChannelScale {
//!     type Elem = f32;
//!     type Input = Hidden;
//!     type Output = Hidden;
//!     const TYPE: &'static str = "Scale";
//!
//!     fn forward_blobs(&mut self, x: &Blob<f32>, y: &Blob<f32>) -> Result<(), BlobError> {
//!         let (g, xd) = (self.gamma.cpu_data()?, x.cpu_data()?);
//!         for (i, o) in y.mutable_cpu_data()?.iter_mut().enumerate() {
//!             *o = xd[i] * g[i % 4];
//!         }
//!         Ok(())
//!     }
//!
//!     fn backward_blobs(&mut self, x: &Blob<f32>, y: &Blob<f32>, down: bool) -> Result<(), BlobError> {
//!         let (xd, dy, g) = (x.cpu_data()?, y.cpu_diff()?, self.gamma.cpu_data()?.to_vec());
//!         let mut dg = self.gamma.mutable_cpu_diff()?;
//!         for i in 0..dy.len() {
//!             dg[i % 4] += dy[i] * xd[i];
//!         }
//!         if down {
//!             for (i, d) in x.mutable_cpu_diff()?.iter_mut().enumerate() {
//!                 *d = dy[i] * g[i % 4];
//!             }
//!         }
//!         Ok(())
//!     }
//!
//!     fn params(&self) -> Vec<&Blob<f32>> {
//!         vec![self.gamma.as_dyn()]
//!     }
//! }
//!
//! let mut scale = ChannelScale { gamma: <blob!(f32; 4)>::new()? };
//! scale.gamma.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
//! let x = TypedBlob::<f32, Hidden>::with_dynamic(2)?;
//! x.mutable_cpu_data()?.fill(1.0);
//! let y = TypedBlob::<f32, Hidden>::with_dynamic(2)?;
//! scale.forward(&x, &y)?; // fed anything but Hidden: a compile error
//! assert_eq!(y.to_vec()?, vec![1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0]);
//! # Ok::<(), blobflow::BlobError>(())
//! ```
//!
//! The `typed_layers` example trains a net with such a layer in it, and
//! gives the layer a CUDA side as the built-in layers have one (feature
//! `cuda`): a kernel in a `.cu` file beside the code, a typed launcher
//! declared with `blobflow::kernels::cuda_kernels!`, and a branch at the
//! top of `forward_blobs`/`backward_blobs` taken when the blobs all live
//! on one CUDA device (`blob.device()` and `runtime::cuda::CudaBackend::of`,
//! the same ordinal for each: a kernel cannot read another GPU's memory),
//! reading their device memory with `runtime::cuda::view`. Its run on a
//! GPU is `typed_layers --device cuda`; `tests/cuda-on-cpu` runs its
//! kernel on the CPU against the layer's CPU arithmetic.
//!
//! On a GPU a layer's work is queued and the host goes on: it waits for
//! the device only where a value must reach it, a host read of a blob
//! that lives there (`cpu_data`, `to_vec`, `accuracy`), or the loss
//! (`SoftmaxWithLoss::value`, `Net::forward`). Uploads do not
//! wait; writing a blob's host side again waits for its last upload. A
//! training loop that reads its loss only when it shows it, as
//! `typed_layers` does and as Caffe's `display` interval would, never
//! holds the GPU back between (`Net::forward_unread` is the net's pass
//! without the read, `Net::loss` the read); one that reads it every step
//! reads it last, once
//! the update is queued too (`Trainer::step` does), so the device has
//! the whole step before the host waits.
//!
//! ## Training
//!
//! The learnable blobs of a net (each layer's `params()`) go to Caffe's
//! solvers, `layers::solver`: an `SgdSolver` (SGD, Nesterov, AdaGrad,
//! RMSProp, AdaDelta or Adam, with Caffe's rate policies) takes a step
//! from the diffs the backward pass left, with a `ParamSpec` (`lr_mult`,
//! `decay_mult`) per blob, where the blobs live. `SolverFile` reads a
//! Caffe solver prototxt into one. Layers add into their parameters'
//! diffs, as in Caffe, so a loop clears them before each backward pass
//! (or lets `iter_size` passes accumulate).
//!
//! ```
//! use blobflow::layers::solver::{ParamSpec, SolverFile};
//! use blobflow::layers::{InnerProduct, Labels, Layer, SoftmaxWithLoss};
//! use blobflow::{blob, typed::TypedBlob};
//!
//! blob!(pub shape Features = _, 2);
//! blob!(pub shape Scores = _, 2);
//!
//! let mut ip = InnerProduct::<f32, Features, 2>::new()?;
//! let mut loss = SoftmaxWithLoss::<f32, Scores>::new();
//! let mut solver = SolverFile::parse("base_lr: 0.5  lr_policy: \"fixed\"  momentum: 0.9")?.solver;
//! // Two points, each of its own class.
//! let x = TypedBlob::<f32, Features>::from_shape(&[2, 2])?;
//! x.mutable_cpu_data()?.copy_from_slice(&[1.0, 0.0, 0.0, 1.0]);
//! let labels = TypedBlob::<f32, Labels<Scores>>::from_shape(&[2])?;
//! labels.mutable_cpu_data()?.copy_from_slice(&[0.0, 1.0]);
//! let scores = TypedBlob::<f32, Scores>::from_shape(&[2, 2])?;
//! let mut first = None;
//! for _ in 0..20 {
//!     ip.forward(&x, &scores)?;
//!     loss.forward(&scores, &labels)?;
//!     first.get_or_insert(loss.value()?);
//!     for p in ip.params() {
//!         p.clear_diff()?;
//!     }
//!     loss.backward(&scores, &labels)?;
//!     ip.backward(&x, &scores, false)?;
//!     solver.step(&ip.params(), &[ParamSpec::default(); 2])?;
//! }
//! assert!(loss.value()? < 0.1 * first.unwrap());
//! # Ok::<(), blobflow::BlobError>(())
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
//! | Reshape of an anonymous shape with a dim above 4096 | `` error[E0277]: the element count of (D<2>, D<5000>) is not known at compile time: it has a dim above 4096 `` | `` element count unknown at compile time `` | `reshape_count_unknown` |
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
//! | Flatten a 1-axis shape | `` error[E0277]: cannot flatten (D<6>,): it needs at least 2 axes, every axis after the first static, and their product at most 4096 `` |  | `flatten_rank1` |
//! | Flatten with a product above 4096 | `` error[E0277]: cannot flatten (Dyn, D<20>, D<24>, D<24>): it needs at least 2 axes, every axis after the first static, and their product at most 4096 `` |  | `flatten_product_too_large` |
//! | Arithmetic on a generic dim without its bound | `` error[E0277]: W has no compile-time arithmetic: dims above 4096 have none `` |  | `generic_arithmetic_unbounded` |
//! | A float as a dim | `` error: expected a dim: an integer literal (`64`), `_` for a dim known at run time, a constant (`CLASSES`, `{ H - 4 }`), or a type parameter bounded by `Dim` (`K`, `H - 4`) `` |  | `macro_float_dim` |
//! | A batch read at run time written into a type | `` error: `batch` looks like a value known only at run time, and a type's dims are known when the program compiles: write `_` for that dim and give its value when the blob is made (`with_dynamic(batch)`, `from_shape(..)`) `` |  | `macro_runtime_batch` |
//! | Two `_` dims | `` error: at most one dim can be `_` (known at run time): its value is the blob's only run-time dim `` |  | `macro_two_dynamic` |
//! | 33 axes | `` error: a blob has at most 32 axes (Caffe's kMaxBlobAxes); this is axis 33 `` |  | `macro_rank_33` |
//! | A count that overflows `usize` | `` error: the element count overflows usize at this dim `` |  | `macro_count_overflow` |
//! | A convolution fed the wrong activation | `` error[E0277]: layer Convolution<f32, Pool1Out, 50, 5> reads Pool1Out, but is fed Conv1Out `` |  | `layer_conv_fed_wrong_activation` |
//! | A convolution whose declared output disagrees with its arithmetic | `` error[E0277]: layer Convolution<f32, Digits, 20, 3> writes (Dyn, D<20>, D<26>, D<26>), but its output blob is Conv1Out `` |  | `layer_conv_declared_output` |
//! | Pooled maps into an inner product of another K | `` error[E0277]: layer InnerProduct<f32, Small, 500> reads Small, but is fed Pool2Out `` |  | `layer_pool_into_wrong_k` |
//! | A layer on f64 fed f32 | `` error[E0277]: layer Activation<f64, Hidden, Rectify> works on f64 blobs, but is fed f32 blobs `` |  | `layer_f64_fed_f32` |
//! | A user's own layer fed the wrong shape | `` error[E0277]: layer Double reads Hidden, but is fed Logits `` |  | `layer_user_defined_fed_wrong` |
//! | A residual branch that ends in other channels than its shortcut | `` error[E0277]: Eltwise combines blobs of one shape, but is given Features and (Dyn, D<128>, D<56>, D<56>) `` | `` shapes differ `` | `net_residual_branch` |
//! | An Eltwise of two declared shapes | `` error[E0277]: Eltwise combines blobs of one shape, but is given Wide and Narrow `` | `` shapes differ `` | `net_eltwise_shapes` |
//! | A Concat whose parts differ outside the channel axis | `` error[E0277]: Concat joins (Dyn, D<64>, D<28>, D<28>) and (Dyn, D<192>, D<14>, D<14>) on the channel axis, but they differ on another axis `` | `` shapes differ outside the channel axis `` | `net_concat_parts` |
//! | One-hot labels to SoftmaxWithLoss | `` error[E0277]: labels OneHot do not fit scores (Dyn, D<10>) `` | `` not the labels of these scores `` | `net_labels_one_hot` |
//! | A convolution declared on a flat (N, 500) blob | `` error[E0277]: a convolution with kernel 3, stride 1 and pad 0 cannot take Hidden `` | `` needs (N, C, H, W) with static H and W of at least the kernel `` | `net_conv_on_vector` |
//! | A Slice that would leave no channels | `` error[E0277]: Slice cannot split Maps at channel 8 `` | `` no such split `` | `net_slice_past_the_channels` |
//! | A typed net's Reshape into another element count | `` error[E0277]: cannot reshape Pool5 into Wrong: element counts differ (D<25088> vs D<25000>) `` | `` element counts differ `` | `net_reshape_count` |
//! | A layer fed its own output (its handle does not exist yet) | `` error[E0425]: cannot find value `conv` in this scope `` | `` not found in this scope `` | `net_fed_its_own_output` |
//! | A blob type where a layer wants a shape | `` error[E0277]: TypedBlob<f32, (Dyn, D<8>)> is not a shape `` |  | `layer_shape_is_a_blob_type` |
//!
//! Anonymous shapes have a count at compile time when each dim is at most
//! 4096 (`CountOf<..>` in a message stands for it); a shape declared with
//! `blob!(shape Name = ..)` carries its count as a number, without limit.

pub use blob_runtime::blob;
pub use blob_runtime::typed::*;
