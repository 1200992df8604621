//! Caffe's Silence: takes any bottoms and produces nothing, so a net's
//! unused blobs are not its outputs (colorization, SSDLite).

use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape};
use crate::layer::Result;

/// Caffe `Silence`: one or more bottoms, no top; backward writes zero
/// gradients to the bottoms that ask for one.
pub(crate) struct SilenceLayer;

impl<T: MathElement> DynLayer<T> for SilenceLayer {
    fn type_name(&self) -> &str {
        "Silence"
    }

    fn bottoms(&self) -> Arity {
        Arity::range(1, usize::MAX)
    }

    fn tops(&self) -> Arity {
        Arity::exactly(0)
    }

    fn reshape(&mut self, _bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Ok(Vec::new())
    }

    fn forward(&mut self, _bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<()> {
        Ok(())
    }

    fn backward(
        &mut self,
        _tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        for (b, &down) in bottoms.iter().zip(propagate_down) {
            if down {
                b.clear_diff()?;
            }
        }
        Ok(())
    }
}
