//! Uses `ml::blob!`, re-exported by an ML crate: this crate names neither
//! `blobflow` nor `blob-runtime`.

ml::blob!(pub shape Hidden = n: _, units: 4);

fn main() -> Result<(), ml::BlobError> {
    let h = ml::typed::TypedBlob::<f32, Hidden>::with_dynamic(2)?;
    h.mutable_cpu_data()?
        .copy_from_slice(&[-1.0, 2.0, -3.0, 4.0, 5.0, -6.0, 7.0, -8.0]);
    ml::relu(&h)?;
    let mut blob = h.into_dyn();
    blob.reshape(&[8])?;
    let flat: ml::blob!(f32; 8) = blob.try_into_static()?;
    println!("{:?}", &*flat.cpu_data()?);
    Ok(())
}
