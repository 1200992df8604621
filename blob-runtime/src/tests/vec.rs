//! Vec in and out: an adopted Vec is the blob's memory until the blob
//! replaces or drops it, and is freed as the Vec it was (miri checks the
//! deallocation and that nothing leaks).

use super::{device_bytes, host_device_pair};
use crate::{Blob, HostBuffer};

#[test]
fn an_adopted_vec_is_the_data_until_a_growing_reshape() {
    let v: Vec<f64> = (0..6).map(f64::from).collect();
    let at = v.as_ptr();
    let mut b = Blob::from_vec(&[2, 3], v).unwrap();
    assert_eq!(b.cpu_data().unwrap().as_ptr(), at);
    b.mutable_cpu_data().unwrap()[5] = 50.0;
    assert_eq!(b.to_vec().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 50.0]);
    // Shrinking keeps the memory (Caffe's capacity rule); growing replaces
    // it, freeing the Vec.
    b.reshape(&[5]).unwrap();
    assert_eq!(b.cpu_data().unwrap().as_ptr(), at);
    b.reshape(&[4, 3]).unwrap();
    assert_eq!(b.count(), 12);
    assert_eq!(b.cpu_data().unwrap()[11], 0.0);
}

#[test]
fn set_cpu_data_hands_an_adopted_vec_back_intact() {
    let mut b = Blob::from_vec(&[3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let old = b
        .set_cpu_data(HostBuffer::from_slice(&[4.0f32, 5.0, 6.0]).unwrap())
        .unwrap();
    let old = old.expect("the adopted buffer");
    assert_eq!(
        bytemuck::cast_slice::<u8, f32>(old.as_bytes()),
        &[1.0, 2.0, 3.0]
    );
    drop(old);
    assert_eq!(b.to_vec().unwrap(), vec![4.0, 5.0, 6.0]);
}

#[test]
fn from_vec_refuses_a_wrong_count_and_keeps_empty_and_spare_capacity_right() {
    let err = Blob::from_vec(&[2, 2], vec![0.0f32; 3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot from_vec: the Vec has 3 elements but 4 are needed"
    );
    let empty = Blob::<f32>::from_vec(&[0, 4], Vec::with_capacity(16)).unwrap();
    assert_eq!(empty.to_vec().unwrap(), Vec::<f32>::new());
    let mut spare = Vec::with_capacity(10);
    spare.extend_from_slice(&[7.0f32, 8.0]);
    let b = Blob::from_vec(&[2], spare).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![7.0, 8.0]);
}

#[test]
fn to_vec_reads_the_newer_side_of_a_device_blob() {
    let (_dev, backend) = host_device_pair();
    let b = Blob::<f32>::with_device(&[2], backend).unwrap();
    {
        let mut g = b.mutable_gpu_data().unwrap();
        device_bytes(&mut g).copy_from_slice(bytemuck::cast_slice(&[3.0f32, 4.0]));
    }
    assert_eq!(b.to_vec().unwrap(), vec![3.0, 4.0]);
}

#[test]
fn into_vec_moves_an_adopted_vec_out_and_copies_what_others_share() -> crate::Result<()> {
    // Reshaped smaller: the capacity stays, the Vec comes back cut to
    // the count, still the same memory.
    let v: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let at = v.as_ptr();
    let mut b = Blob::from_vec(&[6], v)?;
    b.reshape(&[2, 2])?;
    let back = b.into_vec()?;
    assert_eq!(
        (back.as_ptr(), back.as_slice()),
        (at, &[0.0, 1.0, 2.0, 3.0][..])
    );

    // Shared data is copied out: the other blob keeps its values.
    let a = Blob::from_vec(&[3], vec![1.0f64, 2.0, 3.0])?;
    let mut c = Blob::<f64>::new(&[3])?;
    c.share_data(&a)?;
    assert_eq!(c.into_vec()?, [1.0, 2.0, 3.0]);
    assert_eq!(a.to_vec()?, [1.0, 2.0, 3.0]);

    // A clone is a deep copy: data and diff its own.
    let d = Blob::from_vec(&[2], vec![4.0f32, 5.0])?;
    let e = d.clone();
    e.mutable_cpu_diff()?.fill(1.0);
    assert_eq!(d.diff_to_vec()?, [0.0, 0.0]);
    assert_eq!(e.into_vec()?, d.into_vec()?);
    Ok(())
}
