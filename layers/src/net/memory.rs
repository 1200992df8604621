//! Reusing the memory of blobs no later layer reads, in a net that runs
//! forward only ([`Net::reuse_memory`]): what ONNX Runtime's arena and
//! the other inference engines do, so that a layer writes its output
//! into memory a recent layer left in the cache rather than into its own,
//! last touched a whole pass ago.

use std::sync::Arc;

use blob_runtime::{BlobError, MathElement, Result, SyncedMemory};

use super::Net;

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
    /// Gives each intermediate blob, as it is written, the memory of a
    /// blob no later layer reads: a forward pass then writes into memory
    /// the cache still holds, and the net holds less. Caffe has no such
    /// step (its blobs all keep their values, which pycaffe users read);
    /// after it, only the net's inputs and outputs are sure to keep
    /// theirs after a pass, and the intermediate blobs hold whatever the
    /// last blob to use their memory left. The net's results are the
    /// same bits.
    ///
    /// For nets no backward pass runs through (deploy nets, TEST
    /// phase); a blob another blob shares memory with already (a
    /// `Split`'s, a `Flatten`'s) keeps its own, and one that grows past
    /// its shared memory at a reshape gets its own again. Calling it
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
        let count = self.blobs.len();
        // Each blob's first writer and its last user.
        let (mut first, mut last) = (vec![usize::MAX; count], vec![0; count]);
        for (at, layer) in self.layers.iter().enumerate() {
            for &b in &layer.tops {
                first[b] = first[b].min(at);
            }
            for &b in layer.tops.iter().chain(&layer.bottoms) {
                last[b] = last[b].max(at);
            }
        }
        let pinned: Vec<bool> = (0..count)
            .map(|b| {
                self.inputs.contains(&b)
                    || self.outputs.contains(&b)
                    || first[b] == usize::MAX
                    || self.blobs[b].count() == 0
                    // Shared already (a Split's tops, a Flatten's): the
                    // layer keeps them one memory.
                    || Arc::strong_count(self.blobs[b].data()) > 1
            })
            .collect();
        let mut free: Vec<Arc<SyncedMemory>> = Vec::new();
        let mut held: Vec<Option<Arc<SyncedMemory>>> = vec![None; count];
        let mut reuse = MemoryReuse::default();
        for at in 0..self.layers.len() {
            let tops = self.layers[at].tops.clone();
            for b in tops {
                if pinned[b] || first[b] != at || held[b].is_some() {
                    continue;
                }
                let blob = &mut self.blobs[b];
                let need = blob.count() * size_of::<T>();
                // The smallest free memory that holds it, else a new one.
                let fit = free
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.size() >= need)
                    .min_by_key(|(_, m)| m.size())
                    .map(|(i, _)| i);
                let memory = match fit {
                    Some(i) => free.swap_remove(i),
                    None => {
                        reuse.bytes_after += need;
                        Arc::new(match blob.device() {
                            Some(device) => SyncedMemory::with_device(need, device.clone()),
                            None => SyncedMemory::new(need),
                        })
                    }
                };
                reuse.bytes_before += need;
                reuse.blobs += 1;
                blob.share_data_memory(&memory)?;
                held[b] = Some(memory);
            }
            let layer = &self.layers[at];
            for &b in layer.bottoms.iter().chain(&layer.tops) {
                if last[b] == at
                    && let Some(memory) = held[b].take()
                {
                    free.push(memory);
                }
            }
        }
        self.reused = Some(reuse);
        Ok(reuse)
    }
}
