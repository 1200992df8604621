//! Caffe's Tile: the bottom repeated `tiles` times along `axis`.

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(feature = "cuda")]
pub(crate) use cuda::TILE;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, axis_of, bad_param, sub_param};
use crate::layer::Result;

/// Caffe `Tile`: each block from `axis` on (of `inner` values) copied
/// `tiles` times in a row; backward sums the copies' gradients.
pub(crate) struct TileLayer {
    axis: i64,
    tiles: usize,
}

impl TileLayer {
    /// Reads `tile_param`: `tiles` is required and at least 1.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "tile_param");
        let tiles = p.int("tiles");
        if !p.has("tiles") || tiles < 1 {
            return Err(bad_param(
                "set up Tile",
                format!("tile_param.tiles must be given and at least 1, not {tiles}"),
            ));
        }
        Ok(Self {
            axis: p.int("axis"),
            tiles: tiles as usize,
        })
    }

    /// (outer, inner): the blocks and each block's values.
    fn split<T: MathElement>(&self, x: &Blob<T>) -> Result<(usize, usize)> {
        let a = axis_of(x, self.axis, "Tile")?;
        let s = x.shape();
        Ok((s[..a].iter().product(), s[a..].iter().product()))
    }
}

impl<T: MathElement> DynLayer<T> for TileLayer {
    fn type_name(&self) -> &str {
        "Tile"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let a = axis_of(bottoms[0], self.axis, "Tile")?;
        let mut dims = bottoms[0].shape().to_vec();
        dims[a] = dims[a].checked_mul(self.tiles).ok_or_else(|| {
            bad_param("Tile", format!("{} tiles of axis {a} overflow", self.tiles))
        })?;
        Ok(vec![TopShape::new(dims)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (outer, inner) = self.split(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Tile", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (x, mut y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            let n = outer * inner;
            let dims = (outer, inner, self.tiles);
            return cuda::tile_on(
                &gpu,
                dims,
                false,
                &read(&x, n)?,
                &mut write(&mut y, n * self.tiles)?,
            );
        }
        let _ = outer;
        let x = bottoms[0].cpu_data()?;
        let mut y = tops[0].mutable_cpu_data()?;
        for (block, out) in x
            .chunks(inner.max(1))
            .zip(y.chunks_mut((inner * self.tiles).max(1)))
        {
            for copy in out.chunks_mut(inner.max(1)) {
                copy.copy_from_slice(block);
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let (outer, inner) = self.split(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("Tile", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (dy, mut dx) = (
                as_f32(tops[0]).gpu_diff()?,
                as_f32(bottoms[0]).mutable_gpu_diff()?,
            );
            let n = outer * inner;
            let dims = (outer, inner, self.tiles);
            return cuda::tile_on(
                &gpu,
                dims,
                true,
                &read(&dy, n * self.tiles)?,
                &mut write(&mut dx, n)?,
            );
        }
        let _ = outer;
        let dy = tops[0].cpu_diff()?;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        for (block, grads) in dx
            .chunks_mut(inner.max(1))
            .zip(dy.chunks((inner * self.tiles).max(1)))
        {
            block.fill(T::ZERO);
            for copy in grads.chunks(inner.max(1)) {
                for (d, &g) in block.iter_mut().zip(copy) {
                    *d += g;
                }
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
