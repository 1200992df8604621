//! Reusing the memory of blobs no later layer reads, in a net that runs
//! forward only ([`Net::reuse_memory`]): what ONNX Runtime's arena and
//! the other inference engines do, so that a layer writes its output
//! into memory a recent layer left in the cache rather than into its own,
//! last touched a whole pass ago.

use std::sync::Arc;

use blob_runtime::{BlobError, MathElement, Result, SyncedMemory};

use super::{Fold, Net, ShortcutFold};

/// What [`Net::reuse_memory`] did: the blobs that now share memory, and
/// their bytes before and after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReuse {
    /// Blobs given memory another blob held before them.
    pub blobs: usize,
    /// Their bytes, each with its own memory.
    pub bytes_before: usize,
    /// The bytes of the memories they share now.
    pub bytes_after: usize,
}

impl<T: MathElement> Net<T> {
    /// Lets intermediate blobs that are never in use at once share
    /// memory, the largest first (`share_by_size`): a forward pass then
    /// writes into memory an earlier layer of the same pass used, and
    /// the net holds less. Caffe has no such step (its blobs all keep
    /// their values, which pycaffe users read);
    /// after it, only the net's inputs and outputs are sure to keep
    /// theirs after a pass, and the intermediate blobs hold whatever the
    /// last blob to use their memory left. The net's results are the
    /// same bits.
    ///
    /// It also lets a layer add the Eltwise SUM after it as it writes
    /// (ResNet's residual adds,
    /// [`DynLayer::forward_then_shortcut`](crate::DynLayer::forward_then_shortcut)):
    /// where a layer's only top feeds only that sum (through BatchNorms
    /// and Scales in place), with an earlier blob, the layer writes the
    /// sum's top (and the ReLU after it) in one pass, and its own top
    /// is left unwritten. Likewise the Convolutions whose tops a Concat
    /// joins along the channels (SqueezeNet's fire modules, GoogLeNet's
    /// inceptions) each write their channels of the Concat's top, which
    /// then copies nothing.
    ///
    /// For nets no backward pass runs through (deploy nets, TEST
    /// phase); a blob and the views of it (a `Split`'s tops, a
    /// `Flatten`'s) take one memory, and one that grows past its shared
    /// memory at a reshape gets its own again. Calling it
    /// again changes nothing; [`to_device`](Net::to_device) gives every
    /// blob its own memory again, so reuse after moving a net.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     "input: 'x' input_shape { dim: 1 dim: 64 }
    ///      layer { name: 'a' type: 'AbsVal' bottom: 'x' top: 'a' }
    ///      layer { name: 'b' type: 'AbsVal' bottom: 'a' top: 'b' }
    ///      layer { name: 'c' type: 'AbsVal' bottom: 'b' top: 'c' }
    ///      layer { name: 'd' type: 'AbsVal' bottom: 'c' top: 'd' }",
    ///     NetState::test(),
    /// )?;
    /// let reuse = net.reuse_memory()?;
    /// // `c` takes the memory `a` left: `a`, `b`, `c` held three blobs' worth.
    /// assert_eq!((reuse.blobs, reuse.bytes_before, reuse.bytes_after), (3, 768, 512));
    /// net.blob_mut("x").unwrap().mutable_cpu_data()?.fill(-2.0);
    /// net.forward()?;
    /// assert_eq!(net.blob("d").unwrap().cpu_data()?[63], 2.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    ///
    /// # Errors
    /// A net some layer of which runs backward, which reads the blobs
    /// this lets others overwrite.
    pub fn reuse_memory(&mut self) -> Result<MemoryReuse> {
        if let Some(done) = self.reused {
            return Ok(done);
        }
        if let Some(layer) = self.layers.iter().find(|l| l.need_backward) {
            return Err(BlobError::InvalidParameter {
                op: "reuse the memory of a net's blobs",
                detail: format!(
                    "layer '{}' runs backward, which reads the blobs a forward pass would \
                     let others overwrite: reuse memory in nets that only run forward",
                    layer.name
                ),
            });
        }
        self.fold_shortcuts();
        self.fold_concats();
        self.fold_channel_blocks();
        let count = self.blobs.len();
        // The blobs each layer writes: a layer that adds a shortcut
        // writes the sum's top, one that writes a Concat's channels its
        // top.
        let writes: Vec<Vec<usize>> = self
            .layers
            .iter()
            .map(|l| match (l.fold.shortcut, l.fold.into) {
                (Some(s), _) => vec![s.sum],
                (None, Some(into)) => vec![into.top],
                (None, None) => l.tops.clone(),
            })
            .collect();
        // A view that shares a bottom's memory (a Split's tops, a
        // Flatten's) is one with it: the memory goes to the first, and the
        // view takes it again at each reshape.
        let mut root: Vec<usize> = (0..count).collect();
        for layer in &self.layers {
            for &t in &layer.tops {
                let viewed = layer
                    .bottoms
                    .iter()
                    .find(|&&b| b != t && Arc::ptr_eq(self.blobs[t].data(), self.blobs[b].data()));
                if let Some(&b) = viewed {
                    root[t] = root[b];
                }
            }
        }
        let mut members = vec![0usize; count];
        for &r in &root {
            members[r] += 1;
        }
        // Each memory's first writer and its last user.
        let (mut first, mut last) = (vec![usize::MAX; count], vec![0; count]);
        for (at, layer) in self.layers.iter().enumerate() {
            for &b in layer.tops.iter().chain(&writes[at]) {
                first[root[b]] = first[root[b]].min(at);
            }
            for &b in layer.tops.iter().chain(&layer.bottoms).chain(&writes[at]) {
                last[root[b]] = last[root[b]].max(at);
            }
        }
        let kept = |b: usize| {
            self.inputs.contains(&b) || self.outputs.contains(&b) || self.blobs[b].count() == 0
        };
        let mut pinned: Vec<bool> = (0..count)
            .map(|b| {
                root[b] != b
                    || first[b] == usize::MAX
                    // Held by more than the views of it: someone else
                    // keeps it.
                    || Arc::strong_count(self.blobs[b].data()) > members[b]
            })
            .collect();
        for b in 0..count {
            if kept(b) {
                pinned[root[b]] = true;
            }
        }
        // Each memory's bytes: its largest view's.
        let mut need = vec![0usize; count];
        for v in 0..count {
            need[root[v]] = need[root[v]].max(self.blobs[v].count() * size_of::<T>());
        }
        let shared: Vec<usize> = (0..count).filter(|&b| root[b] == b && !pinned[b]).collect();
        let memories = share_by_size(&shared, &need, (&first, &last));
        let mut reuse = MemoryReuse::default();
        for memory in memories {
            let bytes = memory.iter().map(|&b| need[b]).max().unwrap_or(0);
            let device = self.blobs[memory[0]].device().cloned();
            let shared = Arc::new(match device {
                Some(device) => SyncedMemory::with_device(bytes, device),
                None => SyncedMemory::new(bytes),
            });
            reuse.bytes_after += bytes;
            for &b in &memory {
                reuse.bytes_before += need[b];
                reuse.blobs += 1;
                for view in (0..count).filter(|&v| root[v] == b) {
                    self.blobs[view].share_data_memory(&shared)?;
                }
            }
        }
        self.reused = Some(reuse);
        Ok(reuse)
    }

    /// Marks the Eltwise SUMs each layer's pass adds
    /// ([`reuse_memory`](Self::reuse_memory)'s): after a layer `L` that
    /// [folds shortcuts](crate::DynLayer::folds_shortcut), with no
    /// activation of its own, and the BatchNorms and Scales it folds,
    /// a [plain sum](crate::DynLayer::sums_bottoms) of `L`'s only top `t`
    /// and another blob written before `L`, into a third blob, on the
    /// host; `t` read by no other layer and not an output of the net.
    /// The ReLU in place after the sum goes in too.
    fn fold_shortcuts(&mut self) {
        let reads = |blob: usize, layers: std::ops::Range<usize>, net: &Self| {
            net.layers
                .iter()
                .enumerate()
                .filter(|(at, _)| !layers.contains(at))
                .any(|(_, l)| l.bottoms.contains(&blob) || l.tops.contains(&blob))
        };
        for at in 0..self.layers.len() {
            let layer = &self.layers[at];
            let fold = layer.fold;
            let sum_at = at + 1 + fold.affine;
            let (Some(sum), [top]) = (self.layers.get(sum_at), layer.tops.as_slice()) else {
                continue;
            };
            let top = *top;
            let others: Vec<usize> = sum.bottoms.iter().copied().filter(|&b| b != top).collect();
            let ([bottom0, _], [added], [out]) = (
                sum.bottoms.as_slice(),
                others.as_slice(),
                sum.tops.as_slice(),
            ) else {
                continue;
            };
            let (added, out) = (*added, *out);
            let on_host = |b: usize| self.blobs[b].data().device().is_none();
            let written_before = self.inputs.contains(&added)
                || self.layers[..at].iter().any(|l| l.tops.contains(&added));
            if fold.activation.is_some()
                || fold.shortcut.is_some()
                || !layer.layer.folds_shortcut()
                || !sum.layer.sums_bottoms()
                || out == added
                || out == top
                || !written_before
                || self.outputs.contains(&top)
                || self.inputs.contains(&top)
                || reads(top, at..sum_at + 1, self)
                || ![top, added, out].into_iter().all(on_host)
            {
                continue;
            }
            let activation = self
                .layers
                .get(sum_at + 1)
                .filter(|l| l.bottoms == [out] && l.tops == [out])
                .and_then(|l| l.layer.activation());
            self.layers[at].fold = Fold {
                affine: fold.affine,
                shortcut: Some(ShortcutFold {
                    added,
                    first: *bottom0 == added,
                    sum: out,
                }),
                activation,
                into: None,
            };
        }
    }
}

impl<T: MathElement> Net<T> {
    /// Marks the layers that hand their only top to the next layer in
    /// [`ChannelBlocks`](crate::ChannelBlocks) ([`reuse_memory`](Self::reuse_memory)'s):
    /// a layer that [writes blocks](crate::DynLayer::channel_blocks)
    /// from Caffe's layout where it or the layer it writes to
    /// [gains from them alone](crate::DynLayer::prefers_channel_blocks)
    /// (a depthwise Convolution), or that reads them and is handed them,
    /// no shortcut or Concat folded into it, whose top, after the layers
    /// in place it folds, goes to one layer alone that reads blocks and
    /// folds neither, on the host, not an input or output of the net. In
    /// MobileNet-SSD, the chain from conv1/dw to conv11/dw (its 10 x 10
    /// layers run faster from packed weights).
    fn fold_channel_blocks(&mut self) {
        // Which blobs the layers before hand on in blocks.
        let mut planned = vec![false; self.blobs.len()];
        for at in 0..self.layers.len() {
            let layer = &self.layers[at];
            let fold = layer.fold;
            let next = at + 1 + fold.layers();
            let (Some(consumer), [top], [_]) = (
                self.layers.get(next),
                layer.tops.as_slice(),
                layer.bottoms.as_slice(),
            ) else {
                continue;
            };
            let top = *top;
            let read_elsewhere = self
                .layers
                .iter()
                .enumerate()
                .filter(|(l, _)| !(at..=next).contains(l))
                .any(|(_, l)| l.bottoms.contains(&top) || l.tops.contains(&top));
            let plain = |f: Fold| f.shortcut.is_none() && f.into.is_none();
            let (writes, reads) = (
                layer.layer.channel_blocks(),
                consumer.layer.channel_blocks(),
            );
            // From or into a layer that gains from blocks alone (a
            // depthwise one), or on from a layer handed blocks: not
            // between two layers that each run as fast in Caffe's layout
            // (two 1x1 layers).
            let starts = writes.output
                && (layer.layer.prefers_channel_blocks()
                    || consumer.layer.prefers_channel_blocks());
            let goes_on = writes.input && planned[layer.bottoms[0]];
            if !plain(fold)
                || !plain(consumer.fold)
                || !(starts || goes_on)
                || !reads.input
                || consumer.bottoms != [top]
                || consumer.tops.len() != 1
                || consumer.tops == [top]
                || self.outputs.contains(&top)
                || self.inputs.contains(&top)
                || read_elsewhere
                || self.blobs[top].data().device().is_some()
            {
                continue;
            }
            self.layers[at].blocks_to = Some(next);
            planned[top] = true;
        }
        // A depthwise layer handed Caffe's planes starts a chain only
        // where the 1x1 layer it writes to hands blocks on in turn: a 1x1
        // layer that ends a chain writes Caffe's layout from its blocks,
        // slower than its product in that layout (MobileNet-YOLOv3-lite's
        // conv17, 512 x 26 x 26, 3.8 -> 4.1 ms on one Zen 3 core).
        for at in 0..self.layers.len() {
            let layer = &self.layers[at];
            let Some(next) = layer.blocks_to else {
                continue;
            };
            let consumer = &self.layers[next];
            if !planned[layer.bottoms[0]]
                && layer.layer.prefers_channel_blocks()
                && !consumer.layer.prefers_channel_blocks()
                && consumer.blocks_to.is_none()
            {
                self.layers[at].blocks_to = None;
            }
        }
    }

    /// The blobs a pass hands from one layer to the next in
    /// [`ChannelBlocks`](crate::ChannelBlocks) (none before
    /// [`reuse_memory`](Self::reuse_memory)). Each holds that layout
    /// after its layer's pass (whether or not the pass went on to the
    /// layer that reads it), unless the pass stopped among the layers in
    /// place that the writing layer folds; the layer that reads it knows
    /// which.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// let mut net = Net::<f32>::from_prototxt(
    ///     "input: 'x' input_shape { dim: 1 dim: 16 dim: 4 dim: 4 }
    ///      layer { name: 'pw' type: 'Convolution' bottom: 'x' top: 'pw'
    ///        convolution_param { num_output: 16 kernel_size: 1 } }
    ///      layer { name: 'dw' type: 'Convolution' bottom: 'pw' top: 'dw'
    ///        convolution_param { num_output: 16 group: 16 kernel_size: 3 pad: 1 } }
    ///      layer { name: 'out' type: 'Convolution' bottom: 'dw' top: 'out'
    ///        convolution_param { num_output: 16 kernel_size: 1 } }",
    ///     NetState::test(),
    /// )?;
    /// net.reuse_memory()?;
    /// let fast = blob_kernels::cpu::isa() >= blob_kernels::cpu::Isa::Avx2;
    /// // The 1x1 layer writes blocks; the depthwise layer reads them and
    /// // hands its own on to the last.
    /// let chain = if fast { vec!["pw", "dw"] } else { vec![] };
    /// assert_eq!(net.blobs_in_channel_blocks(), chain);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn blobs_in_channel_blocks(&self) -> Vec<&str> {
        self.layers
            .iter()
            .filter(|l| l.blocks_to.is_some())
            .map(|l| self.blob_names[l.tops[0]].as_str())
            .collect()
    }
}

/// The memories that blobs with the lifetimes `first..=last` (layer
/// indices: the first writer, the last reader) share: the largest blob
/// first, each into the smallest memory already made whose blobs all
/// live at other times, else into a memory of its own, so that each
/// memory is as large as its first blob. Taken in the layers' order
/// instead (each blob into the smallest free memory as it is written, a
/// new one where none is free yet), a large blob written while only
/// smaller memories are free needs one more: MobileNet-SSD's conv1 (5.8
/// MB) came when its two memories of 2.9 MB were made, one still in use,
/// and its intermediate blobs held 12.0 MB; so, 10.3 (SqueezeNet v1.1
/// 6.5 -> 5.1, GoogLeNet 8.6 -> 7.7, CaffeNet 2.2 -> 1.7, ResNet-50 11.2
/// either way). The passes ran as fast (MobileNet-SSD 11.81 / 11.76 ms
/// on one Zen 5 core, medians of 7 alternating runs, 2026-12-05).
fn share_by_size(
    blobs: &[usize],
    need: &[usize],
    (first, last): (&[usize], &[usize]),
) -> Vec<Vec<usize>> {
    let mut order = blobs.to_vec();
    order.sort_by_key(|&b| (std::cmp::Reverse(need[b]), first[b]));
    let mut memories: Vec<Vec<usize>> = Vec::new();
    for b in order {
        let apart = |other: &usize| last[*other] < first[b] || last[b] < first[*other];
        let fit = memories
            .iter_mut()
            .filter(|memory| memory.iter().all(apart))
            .min_by_key(|memory| need[memory[0]]);
        match fit {
            Some(memory) => memory.push(b),
            None => memories.push(vec![b]),
        }
    }
    memories
}

#[cfg(test)]
mod tests {
    use super::share_by_size;
    use crate::net::{Net, NetState};

    /// A depthwise layer reading Caffe's planes hands its top on in
    /// blocks where the 1x1 layer after it hands its own on to the next
    /// depthwise layer, and not where that 1x1 layer's top is the net's
    /// output.
    /// The blobs a net of `text` hands on in channel blocks once it
    /// reuses memory.
    fn blobs_in_blocks(text: &str) -> Vec<String> {
        let mut net = Net::<f32>::from_prototxt(text, NetState::test()).unwrap();
        net.reuse_memory().unwrap();
        net.blobs_in_channel_blocks()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_depthwise_layer_from_planes_starts_a_chain_that_goes_on() {
        let blocked = |goes_on: bool| {
            let conv = |name: &str, bottom: &str, group: usize, kernel: usize| {
                format!(
                    "layer {{ name: '{name}' type: 'Convolution' bottom: '{bottom}' top: '{name}' \
                     convolution_param {{ num_output: 16 group: {group} kernel_size: {kernel} \
                     pad: {} }} }}",
                    kernel / 2
                )
            };
            let text = format!(
                "input: 'x' input_shape {{ dim: 1 dim: 16 dim: 32 dim: 32 }} {} {} {}",
                conv("dw", "x", 16, 3),
                conv("pw", "dw", 1, 1),
                if goes_on {
                    conv("dw2", "pw", 16, 3) + &conv("out", "dw2", 1, 1)
                } else {
                    String::new()
                }
            );
            blobs_in_blocks(&text)
        };
        let fast = blob_kernels::cpu::isa() >= blob_kernels::cpu::Isa::Avx2;
        let chain: &[&str] = if fast { &["dw", "pw", "dw2"] } else { &[] };
        assert_eq!(blocked(true), chain);
        assert!(blocked(false).is_empty());
    }

    /// A net's first layer (3 channels, MobileNet's window) writes
    /// blocks for the depthwise layer after it, not for a 1x1 layer,
    /// which runs as fast from Caffe's planes.
    #[test]
    fn a_first_layer_writes_blocks_for_a_depthwise_layer() {
        let blocked = |group: usize, kernel: usize| {
            let text = format!(
                "input: 'x' input_shape {{ dim: 1 dim: 3 dim: 33 dim: 33 }}
                 layer {{ name: 'conv0' type: 'Convolution' bottom: 'x' top: 'conv0'
                   convolution_param {{ num_output: 16 kernel_size: 3 pad: 1 stride: 2 }} }}
                 layer {{ name: 'next' type: 'Convolution' bottom: 'conv0' top: 'next'
                   convolution_param {{ num_output: 16 group: {group} kernel_size: {kernel}
                     pad: {} }} }}
                 layer {{ name: 'out' type: 'Convolution' bottom: 'next' top: 'out'
                   convolution_param {{ num_output: 16 kernel_size: 1 }} }}",
                kernel / 2
            );
            blobs_in_blocks(&text)
        };
        let fast = blob_kernels::cpu::isa() >= blob_kernels::cpu::Isa::Avx2;
        let chain: &[&str] = if fast { &["conv0", "next"] } else { &[] };
        assert_eq!(blocked(16, 3), chain);
        assert!(blocked(1, 1).is_empty());
    }

    #[test]
    fn the_largest_blob_takes_a_memory_first() {
        // x -> a -> b -> c -> d, c twice a's size: in the layers' order a
        // and b take a memory each and c a third (four units); by size, c
        // first, then a (apart from c) into c's memory, b into its own.
        let (need, first, last) = ([0, 1, 1, 2, 0], [0, 0, 1, 2, 3], [0, 1, 2, 3, 3]);
        let memories = share_by_size(&[1, 2, 3], &need, (&first, &last));
        assert_eq!(memories, vec![vec![3, 1], vec![2]]);
        let bytes: usize = memories.iter().map(|m| need[m[0]]).sum();
        assert_eq!(bytes, 3);
    }
}
