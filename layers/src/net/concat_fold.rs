//! A Concat along the channels folded into the layers that write its
//! bottoms, in a net that reuses memory: each writes its channels of the
//! Concat's top where it would have written its own, and the join, a
//! pass over the whole top, is gone.

use blob_runtime::{Blob, MathElement, Result};

use super::{Net, NetLayer, gathered, net_error, shown};

/// A Concat along the channels one of whose bottoms is a layer's only
/// top: the layer writes that bottom's channels of the Concat's top,
/// the bottom stays unwritten, and the Concat copies nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ConcatInto {
    /// The Concat layer.
    pub(super) concat: usize,
    /// Its top.
    pub(super) top: usize,
}

/// Where each of a channel Concat's `bottoms` starts among the channels
/// of its `top`, where their shapes now make that top (every axis but
/// the channels the same, the channels adding up); `None` otherwise.
pub(super) fn concat_offsets<T: MathElement>(
    blobs: &[Blob<T>],
    bottoms: &[usize],
    top: usize,
) -> Option<Vec<usize>> {
    let t = blobs[top].shape();
    if t.len() < 2 {
        return None;
    }
    let mut offsets = Vec::with_capacity(bottoms.len());
    let mut channels = 0;
    for &b in bottoms {
        let s = blobs[b].shape();
        if s.len() != t.len() || s[0] != t[0] || s[2..] != t[2..] {
            return None;
        }
        offsets.push(channels);
        channels += s[1];
    }
    (channels == t[1]).then_some(offsets)
}

/// A Concat some of whose bottoms' layers wrote their channels of its
/// top (`joined`, in the order of its bottoms): the other bottoms are
/// copied in. Their channels must still lie where those layers wrote
/// theirs; otherwise the pass fails rather than join stale values.
pub(super) fn join_unwritten<T: MathElement>(
    blobs: &[Blob<T>],
    entry: &NetLayer<T>,
    joined: &[bool],
) -> Result<()> {
    let top = entry.tops[0];
    let offsets = concat_offsets(blobs, &entry.bottoms, top).ok_or_else(|| {
        net_error(
            format!("layer '{}'", shown(&entry.name)),
            format!(
                "the layers before it wrote their channels of its top for a shape it no \
                 longer has ({}): run the whole net again",
                blobs[top].shape_string()
            ),
        )
    })?;
    let images = blobs[top].shape()[0];
    let stride = blobs[top].count() / images.max(1);
    let mut out = blobs[top].mutable_cpu_data()?;
    for ((&b, &first), _) in entry
        .bottoms
        .iter()
        .zip(&offsets)
        .zip(joined)
        .filter(|(_, wrote)| !**wrote)
    {
        let x = blobs[b].cpu_data()?;
        let per_image = x.len() / images.max(1);
        let inner = stride / blobs[top].shape()[1].max(1);
        for (n, image) in x.chunks_exact(per_image.max(1)).enumerate() {
            out[n * stride + first * inner..][..per_image].copy_from_slice(image);
        }
    }
    Ok(())
}

impl<T: MathElement> Net<T> {
    /// Marks the Concats along the channels whose bottoms the layers
    /// that write them write into its top instead
    /// ([`reuse_memory`](Self::reuse_memory)'s): each bottom the only top
    /// of a layer that [folds a concat](crate::DynLayer::folds_concat),
    /// written by no other layer, read by no other than the layers that
    /// layer folds and the Concat, not an input or output of the net, all
    /// on the host. The join was a pass over the whole top: 6% of
    /// SqueezeNet's.
    pub(super) fn fold_concats(&mut self) {
        let touches =
            |blob: usize, l: &NetLayer<T>| l.bottoms.contains(&blob) || l.tops.contains(&blob);
        for at in 0..self.layers.len() {
            let concat = &self.layers[at];
            let ([top], bottoms) = (concat.tops.as_slice(), concat.bottoms.as_slice()) else {
                continue;
            };
            let top = *top;
            let on_host = |b: usize| self.blobs[b].data().device().is_none();
            let distinct = bottoms
                .iter()
                .enumerate()
                .all(|(i, b)| !bottoms[..i].contains(b) && *b != top);
            let joins = gathered(&self.blobs, bottoms, |blobs| {
                concat.layer.joins_channels(blobs)
            });
            if !distinct || !joins || !on_host(top) {
                continue;
            }
            let writers: Option<Vec<usize>> = bottoms
                .iter()
                .map(|&b| {
                    let writer = self.layers[..at].iter().position(|l| l.tops.contains(&b))?;
                    let layer = &self.layers[writer];
                    let covered = writer..=writer + layer.fold.layers();
                    let others_touch = self
                        .layers
                        .iter()
                        .enumerate()
                        .any(|(i, l)| i != at && !covered.contains(&i) && touches(b, l));
                    let fits = layer.tops == [b]
                        && !layer.bottoms.contains(&b)
                        && layer.layer.folds_concat()
                        && layer.fold.shortcut.is_none()
                        && layer.fold.into.is_none()
                        && !others_touch
                        && !self.inputs.contains(&b)
                        && !self.outputs.contains(&b)
                        && on_host(b);
                    fits.then_some(writer)
                })
                .collect();
            let Some(writers) = writers else {
                continue;
            };
            for &writer in &writers {
                self.layers[writer].fold.into = Some(ConcatInto { concat: at, top });
            }
            self.layers[at].joined_by = writers;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::NetState;

    /// A Concat whose first bottom's layer wrote its channels: the
    /// second is copied in beside them, image by image, and a top whose
    /// shape no longer fits is refused rather than joined.
    #[test]
    fn the_bottoms_not_written_are_joined() {
        let mut net = Net::<f32>::from_prototxt(
            "input: 'a' input_shape { dim: 2 dim: 2 dim: 1 dim: 3 }
             input: 'b' input_shape { dim: 2 dim: 1 dim: 1 dim: 3 }
             layer { name: 'c' type: 'Concat' bottom: 'a' bottom: 'b' top: 'c' }",
            NetState::test(),
        )
        .unwrap();
        let fill = |net: &mut Net<f32>, name: &str, from: f32| {
            let blob = net.blob_mut(name).unwrap();
            for (i, v) in blob.mutable_cpu_data().unwrap().iter_mut().enumerate() {
                *v = from + i as f32;
            }
        };
        fill(&mut net, "a", 0.0);
        fill(&mut net, "b", 100.0);
        net.forward().unwrap();
        let want = net.blob("c").unwrap().to_vec().unwrap();
        // As a's layer leaves it: its channels written, b's stale.
        {
            let c = net.blob("c").unwrap();
            let mut out = c.mutable_cpu_data().unwrap();
            for image in out.chunks_mut(9) {
                image[6..].fill(f32::NAN);
            }
        }
        let at = net.layers.iter().position(|l| l.name == "c").unwrap();
        join_unwritten(&net.blobs, &net.layers[at], &[true, false]).unwrap();
        assert_eq!(net.blob("c").unwrap().to_vec().unwrap(), want);
        net.blob_mut("c").unwrap().reshape(&[2, 4, 1, 3]).unwrap();
        let err = join_unwritten(&net.blobs, &net.layers[at], &[true, false]).unwrap_err();
        assert!(err.to_string().contains("no longer has (2 4 1 3"), "{err}");
    }
}
