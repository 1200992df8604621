//! The nets' heavy code compiled here, once for f32 and once for f64,
//! rather than in every crate that runs a net.
//!
//! Rust compiles a generic function in the crate that uses it with
//! concrete types, and optimized builds do not share those instances
//! between crates: a user's program calling `Net::<f32>::forward` used to
//! compile the net's code, every layer's (through the registry that
//! builds them) and the solvers' again, on every release rebuild after a
//! one-line edit. The entry points below call through a table of
//! function pointers instead; the two tables are statics of this crate,
//! so the instances they point to are compiled here, and a user's crate
//! compiles only a table lookup. [`MathElement`] is sealed to f32 and
//! f64, so the two tables cover every net.

use std::any::Any;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::layer::Result;
use crate::net::{Net, NetState};
use crate::registry::LayerRegistry;
use crate::solver::{ParamSpec, SgdSolver};

/// The caller's input shapes, by input name.
type InputShapes = [(String, Vec<usize>)];
/// A net built from its parameter, state, registry and input shapes.
type BuildNet<T> = fn(&ParamMessage, NetState, &LayerRegistry<T>, &InputShapes) -> Result<Net<T>>;
/// A solver's step over parameter blobs and their specs.
type SolverStep<T> = fn(&mut SgdSolver<T>, &[&Blob<T>], &[ParamSpec]) -> Result<()>;

/// One element type's entry points.
pub(crate) struct Compiled<T: MathElement> {
    /// Every built-in layer type into a registry.
    pub register_caffe_layers: fn(&mut LayerRegistry<T>),
    /// Caffe's `Net::Init` from a `NetParameter`.
    pub build_net: BuildNet<T>,
    /// Layers `start..=end` forward.
    pub run_layers: fn(&mut Net<T>, usize, usize) -> Result<()>,
    /// Layers `start` down to `end` backward.
    pub backward_from_to: fn(&mut Net<T>, usize, usize) -> Result<()>,
    /// Every layer's reshape.
    pub reshape: fn(&mut Net<T>) -> Result<()>,
    /// A solver's update.
    pub solver_step: SolverStep<T>,
}

/// The table of `T`'s instances.
macro_rules! compiled {
    ($t:ty) => {
        Compiled::<$t> {
            register_caffe_layers: crate::net_layers::register_all::<$t>,
            build_net: Net::<$t>::build_here,
            run_layers: Net::<$t>::run_layers_here,
            backward_from_to: Net::<$t>::backward_from_to_here,
            reshape: Net::<$t>::reshape_here,
            solver_step: SgdSolver::<$t>::step_here,
        }
    };
}

static F32: Compiled<f32> = compiled!(f32);
static F64: Compiled<f64> = compiled!(f64);

/// `T`'s table.
pub(crate) fn compiled<T: MathElement>() -> &'static Compiled<T> {
    let tables: [&'static (dyn Any + Sync); 2] = [&F32, &F64];
    tables
        .into_iter()
        .find_map(|table| (table as &dyn Any).downcast_ref::<Compiled<T>>())
        .expect("MathElement is sealed to f32 and f64, which both have a table")
}
