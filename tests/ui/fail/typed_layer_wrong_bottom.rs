// A typed layer declares its bottom as (_, C); a net that feeds it rows
// of another width does not compile, and the message names the layer and
// both shapes.
use blobflow::layers::typed_layer::TypedLayer;
use blobflow::layers::typed_net::*;
use blobflow::typed::TypedBlob;

struct Gain<const C: usize>;

impl<const C: usize> TypedLayer<f32> for Gain<C> {
    const TYPE: &'static str = "Gain";
    type Bottoms = ((Dyn, D<C>),);
    type Tops = ((Dyn, D<C>),);
    type Params = ((D<C>,),);
    fn from_param(_: &blobflow::proto::ParamMessage) -> blobflow::runtime::Result<Self> {
        Ok(Gain)
    }
    fn forward(
        &mut self,
        _: (&TypedBlob<f32, (Dyn, D<C>)>,),
        _: (&TypedBlob<f32, (Dyn, D<C>)>,),
        _: (&TypedBlob<f32, (D<C>,)>,),
    ) -> blobflow::runtime::Result<()> {
        Ok(())
    }
    fn backward(
        &mut self,
        _: (&TypedBlob<f32, (Dyn, D<C>)>,),
        _: &[bool],
        _: (&TypedBlob<f32, (Dyn, D<C>)>,),
        _: (&TypedBlob<f32, (D<C>,)>,),
    ) -> blobflow::runtime::Result<()> {
        Ok(())
    }
}

blobflow::blob!(pub shape Features = _, 16);

fn main() {
    let mut n = NetSpec::<f32>::new("gain");
    let x = n.input::<Features>("x");
    let _ = n.add_typed("gain", &x, Gain::<32>);
    let _ = n.add_typed("two", (&x, &x), Gain::<16>);
}
