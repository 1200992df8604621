//! What a GPU run does with its blobs, checked without a GPU: LeNet and
//! its trainer on the host device (host memory standing in for a device,
//! `blobflow::runtime::host_device`). The layers find no kernels for it
//! and run their CPU side, so every value must equal the host run's bit
//! for bit; what differs is which blobs the net holds (device blobs made
//! by `to_device`, a solver history following its parameter, a snapshot
//! read from them and restored), which is what a GPU run relies on.

use std::sync::Arc;

use blobflow::CaffeModel;
use blobflow::layers::net::Net;
use blobflow::runtime::DeviceBackend;
use blobflow::runtime::host_device::HostDevice;
use blobflow_mnist::Trainer;

#[path = "support/digits.rs"]
mod digits;

use digits::{digits, root};

fn device() -> Arc<dyn DeviceBackend> {
    HostDevice::new()
}

/// Caffe's deploy LeNet with the shipped weights.
fn lenet(batch: usize) -> Net<f32> {
    let mut net = Net::<f32>::builder()
        .input_shape("data", &[batch, 1, 28, 28])
        .from_file(root().join("models/lenet/lenet.prototxt"))
        .unwrap();
    let model = root().join("models/lenet/lenet_iter_10000.caffemodel");
    net.copy_from(&CaffeModel::open(model).unwrap()).unwrap();
    net
}

/// `Net::to_device` keeps the trained weights: the net on the device
/// gives the host's probabilities on 500 digits, its blobs there.
#[test]
fn lenet_moved_to_a_device_keeps_its_weights() {
    let data = digits();
    let batch = 100;
    let mut on_host = lenet(batch);
    let mut on_device = lenet(batch);
    assert_eq!(on_host.blob("data").unwrap().shape(), [batch, 1, 28, 28]);
    let dev = device();
    on_device.to_device(dev.clone()).unwrap();
    for p in on_device.param_blobs() {
        assert!(p.device().is_some_and(|d| Arc::ptr_eq(d, &dev)));
    }
    for start in (0..500).step_by(batch) {
        for net in [&mut on_host, &mut on_device] {
            let input = net.blob("data").unwrap();
            data.scaled_into(start, 0.00390625, &mut input.mutable_cpu_data().unwrap());
            net.forward().unwrap();
        }
        let prob = |net: &Net<f32>| net.blob("prob").unwrap().to_vec().unwrap();
        assert_eq!(
            prob(&on_device),
            prob(&on_host),
            "digits {start}..{}",
            start + batch
        );
    }
}

/// Training on the device (the solver's history following its parameter
/// there, updates applied on the device) takes the host's steps exactly,
/// and a run resumed from its own snapshot on the device continues
/// exactly.
#[test]
fn training_and_resuming_on_a_device_repeat_the_host_run() {
    let data = digits();
    let (batch, total, cut) = (16, 10, 4);
    let mut on_host = Trainer::new(batch, 8000, 1701).unwrap();
    let mut on_device = Trainer::new(batch, 8000, 1701).unwrap();
    let host_device = HostDevice::new();
    let dev: Arc<dyn DeviceBackend> = host_device.clone();
    on_device.to_device(dev.clone()).unwrap();
    let dir = std::env::temp_dir().join(format!("blobflow-device-{}", std::process::id()));
    let (mut losses, mut snapshot) = (Vec::new(), None);
    for it in 0..total {
        // The weights read on the device, as CUDA layers would: the
        // solver's update then runs there (Caffe's Update on a SYNCED head).
        for p in on_device.net.param_blobs() {
            drop(p.gpu_data().unwrap());
        }
        let (h, d) = (on_host.step(&data).unwrap(), on_device.step(&data).unwrap());
        assert_eq!(
            h.to_bits(),
            d.to_bits(),
            "loss at iteration {it}: {h} vs {d}"
        );
        losses.push(d);
        if on_device.solver.iter == cut {
            snapshot = Some(on_device.snapshot(&dir, "lenet").unwrap().1);
        }
    }
    assert!(
        host_device.math_calls() >= 8 * total,
        "every update on the device: {} device calls",
        host_device.math_calls()
    );
    for (h, d) in on_host
        .net
        .param_blobs()
        .iter()
        .zip(on_device.net.param_blobs())
    {
        assert_eq!(h.to_vec().unwrap(), d.to_vec().unwrap());
    }

    let mut resumed = Trainer::resume(snapshot.unwrap(), batch, 8000).unwrap();
    resumed.to_device(dev).unwrap();
    let again: Vec<u32> = (cut..total)
        .map(|_| resumed.step(&data).unwrap().to_bits())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let want: Vec<u32> = losses[cut..].iter().map(|l| l.to_bits()).collect();
    assert_eq!(again, want, "resumed on the device");
}
