//! The user's own compile-fail suite, through the renamed dependency: the
//! pass case makes trybuild build; the fail cases pin the messages.

#[test]
fn shape_rules_hold_in_a_users_crate() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}

#[test]
fn the_layer_runs() -> Result<(), bf::BlobError> {
    let x = <bf::blob!(f32; 1, 2, 1, 2)>::new()?;
    x.mutable_cpu_data()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
    let gamma = <bf::blob!(f32; 2)>::new()?;
    gamma.mutable_cpu_data()?.copy_from_slice(&[10.0, -1.0]);
    downstream_renamed::scale_channels(&x, &gamma)?;
    assert_eq!(&*x.cpu_data()?, &[10.0, 20.0, -3.0, -4.0]);
    assert_eq!(downstream_renamed::logits(3)?.shape(), &[3, 10]);
    Ok(())
}
