//! Random sequences of blob operations against a small model of the
//! memory: which buffers exist, which blobs share them, their contents, and
//! whether they were ever touched (the only part of the head that changes
//! what a caller sees).

use proptest::prelude::*;

use super::{device_bytes, device_view, host_device_pair};
use crate::{Blob, HostBuffer};

#[derive(Clone, Debug)]
enum Op {
    Reshape(usize, Vec<usize>),
    ShareData(usize, usize),
    ShareDiff(usize, usize),
    SetCpuData(usize, i8),
    WriteCpu(usize, usize, i8),
    WriteDiff(usize, usize, i8),
    WriteGpuAll(usize, i8),
    ReadCpu(usize),
    ReadGpu(usize),
    Update(usize),
    Shrink(usize),
    ScaleData(usize, i8),
}

#[derive(Clone, Debug)]
struct Mem {
    vals: Vec<f32>,
    touched: bool,
}

#[derive(Clone, Debug)]
struct ModelBlob {
    count: usize,
    data: usize,
    diff: usize,
}

#[derive(Debug, Default)]
struct Model {
    mems: Vec<Mem>,
    blobs: Vec<ModelBlob>,
}

impl Model {
    fn new_mem(&mut self, len: usize) -> usize {
        self.mems.push(Mem {
            vals: vec![0.0; len],
            touched: false,
        });
        self.mems.len() - 1
    }
    fn capacity(&self, b: usize) -> usize {
        let m = &self.blobs[b];
        self.mems[m.data]
            .vals
            .len()
            .min(self.mems[m.diff].vals.len())
    }
    fn reshape(&mut self, b: usize, count: usize) {
        if count > self.capacity(b) {
            let (d, g) = (self.new_mem(count), self.new_mem(count));
            self.blobs[b].data = d;
            self.blobs[b].diff = g;
        }
        self.blobs[b].count = count;
    }
    fn data(&mut self, b: usize) -> &mut Mem {
        let i = self.blobs[b].data;
        &mut self.mems[i]
    }
    fn diff(&mut self, b: usize) -> &mut Mem {
        let i = self.blobs[b].diff;
        &mut self.mems[i]
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let blob = 0..2usize;
    let shape = prop::collection::vec(0..4usize, 0..4);
    prop_oneof![
        (blob.clone(), shape).prop_map(|(b, s)| Op::Reshape(b, s)),
        (blob.clone(), blob.clone()).prop_map(|(a, b)| Op::ShareData(a, b)),
        (blob.clone(), blob.clone()).prop_map(|(a, b)| Op::ShareDiff(a, b)),
        (blob.clone(), any::<i8>()).prop_map(|(b, v)| Op::SetCpuData(b, v)),
        (blob.clone(), any::<usize>(), any::<i8>()).prop_map(|(b, i, v)| Op::WriteCpu(b, i, v)),
        (blob.clone(), any::<usize>(), any::<i8>()).prop_map(|(b, i, v)| Op::WriteDiff(b, i, v)),
        (blob.clone(), any::<i8>()).prop_map(|(b, v)| Op::WriteGpuAll(b, v)),
        blob.clone().prop_map(Op::ReadCpu),
        blob.clone().prop_map(Op::ReadGpu),
        blob.clone().prop_map(Op::Update),
        blob.clone().prop_map(Op::Shrink),
        (blob, -2..3i8).prop_map(|(b, f)| Op::ScaleData(b, f)),
    ]
}

fn run(ops: &[Op]) {
    let (_, dev) = host_device_pair();
    let mut blobs = [
        Blob::<f32>::with_device(&[2, 3], dev.clone()).unwrap(),
        Blob::<f32>::with_device(&[6], dev).unwrap(),
    ];
    let mut model = Model::default();
    for count in [6, 6] {
        let (d, g) = (model.new_mem(count), model.new_mem(count));
        model.blobs.push(ModelBlob {
            count,
            data: d,
            diff: g,
        });
    }
    for op in ops {
        match *op {
            Op::Reshape(b, ref s) => {
                blobs[b].reshape(s).unwrap();
                model.reshape(b, s.iter().product());
            }
            Op::ShareData(a, b) | Op::ShareDiff(a, b) => {
                let src = std::mem::take(&mut blobs[b]);
                let is_data = matches!(op, Op::ShareData(..));
                let r = if a == b {
                    Ok(())
                } else if is_data {
                    blobs[a].share_data(&src)
                } else {
                    blobs[a].share_diff(&src)
                };
                if a != b {
                    blobs[b] = src;
                } else {
                    blobs[a] = src;
                }
                let same = model.blobs[a].count == model.blobs[b].count;
                assert_eq!(r.is_ok(), same, "{op:?}: {r:?}");
                if same {
                    if is_data {
                        model.blobs[a].data = model.blobs[b].data;
                    } else {
                        model.blobs[a].diff = model.blobs[b].diff;
                    }
                }
            }
            Op::SetCpuData(b, v) => {
                let count = model.blobs[b].count;
                let buf = HostBuffer::from_slice(&vec![v as f32; count]).unwrap();
                blobs[b].set_cpu_data(buf).unwrap();
                if model.data(b).vals.len() != count {
                    let (d, g) = (model.new_mem(count), model.new_mem(count));
                    model.blobs[b].data = d;
                    model.blobs[b].diff = g;
                }
                let m = model.data(b);
                m.vals = vec![v as f32; count];
                m.touched = true;
            }
            Op::WriteCpu(b, i, v) | Op::WriteDiff(b, i, v) => {
                let count = model.blobs[b].count;
                if count == 0 {
                    continue;
                }
                let i = i % count;
                let diff = matches!(op, Op::WriteDiff(..));
                if diff {
                    blobs[b].mutable_cpu_diff().unwrap()[i] = v as f32;
                } else {
                    blobs[b].mutable_cpu_data().unwrap()[i] = v as f32;
                }
                let m = if diff { model.diff(b) } else { model.data(b) };
                m.vals[i] = v as f32;
                m.touched = true;
            }
            Op::WriteGpuAll(b, v) => {
                let count = model.blobs[b].count;
                let mut g = blobs[b].mutable_gpu_data().unwrap();
                let vals: &mut [f32] = bytemuck::cast_slice_mut(device_bytes(&mut g));
                vals[..count].fill(v as f32);
                let m = model.data(b);
                m.vals[..count].fill(v as f32);
                m.touched = true;
            }
            Op::ReadCpu(b) => {
                let count = model.blobs[b].count;
                let got = blobs[b].cpu_data().unwrap().to_vec();
                let m = model.data(b);
                assert_eq!(got, m.vals[..count], "{op:?}");
                m.touched |= !m.vals.is_empty();
            }
            Op::ReadGpu(b) => {
                let count = model.blobs[b].count;
                let g = blobs[b].gpu_data().unwrap();
                let vals: &[f32] = bytemuck::cast_slice(device_view(&g));
                let m = model.data(b);
                assert_eq!(vals[..count], m.vals[..count], "{op:?}");
                m.touched = true;
            }
            Op::Update(b) => {
                let r = blobs[b].update();
                let count = model.blobs[b].count;
                if count == 0 {
                    assert!(r.is_ok());
                } else if !model.data(b).touched {
                    assert!(r.is_err(), "update of untouched memory must fail");
                } else {
                    r.unwrap();
                    let diff = model.diff(b).vals[..count].to_vec();
                    model.diff(b).touched = true;
                    for (d, g) in model.data(b).vals.iter_mut().zip(diff) {
                        *d -= g;
                    }
                }
            }
            Op::Shrink(b) => {
                blobs[b].shrink_to_fit().unwrap();
                let count = model.blobs[b].count;
                let (dl, gl) = (model.data(b).vals.len(), model.diff(b).vals.len());
                if !(dl.min(gl) == count && dl == gl) {
                    for is_data in [true, false] {
                        let old = if is_data {
                            model.data(b)
                        } else {
                            model.diff(b)
                        }
                        .clone();
                        let i = model.new_mem(count);
                        if old.touched {
                            model.mems[i].vals.copy_from_slice(&old.vals[..count]);
                            model.mems[i].touched = true;
                        }
                        if is_data {
                            model.blobs[b].data = i;
                        } else {
                            model.blobs[b].diff = i;
                        }
                    }
                }
            }
            Op::ScaleData(b, f) => {
                blobs[b].scale_data(f as f32).unwrap();
                let count = model.blobs[b].count;
                let m = model.data(b);
                if count > 0 && m.touched {
                    m.vals[..count].iter_mut().for_each(|v| *v *= f as f32);
                }
            }
        }
        for (b, blob) in blobs.iter().enumerate() {
            assert_eq!(blob.count(), model.blobs[b].count);
            assert_eq!(
                blob.capacity(),
                model.capacity(b),
                "capacity of blob {b} after {op:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 8 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_sequences_match_the_model(ops in prop::collection::vec(op_strategy(), 1..40)) {
        run(&ops);
    }
}
