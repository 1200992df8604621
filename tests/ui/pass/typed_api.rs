//! Everything the typed API allows, built (not only checked).
use blobflow::blob;
use blobflow::typed::{D, Dim, DimSub, Dyn, Shape, TypedBlob};

blob!(pub shape Conv1Out = n: 64, c: 20, h: 24, w: 24);
blob!(shape Pool2Out = _, 50, 4, 4);
blob!(shape FcIn = 64, 11520);

const CLASSES: usize = 10;
const H: usize = 28;

// blob! wherever a type goes: aliases with named constants and constant
// expressions, struct fields, generic structs.
type Logits = blob!(f32; _, CLASSES);
type Cropped = blob!(f32; _, 1, { H - 4 }, { H - 4 });

struct Linear<I: Dim, O: Dim> {
    w: blob!(f32; O, I),
    b: blob!(f32; O),
}

impl<I: Dim, O: Dim> Linear<I, O> {
    fn shapes(&self) -> (Vec<usize>, Vec<usize>) {
        (self.w.shape().to_vec(), self.b.shape().to_vec())
    }
}

const OFF: usize = <blob!(f32; 2, 3, 4)>::static_offset(&[1, 2, 3]);

fn relu<B: Dim, K: Dim>(x: &blob!(f32; B, K)) {
    for v in x.mutable_cpu_data().unwrap().iter_mut() {
        *v = v.max(0.0);
    }
}

/// Type-level arithmetic on a generic dim.
fn crop<N: Dim, W>(x: &blob!(f32; N, W)) -> blob!(f32; N, W - 4)
where
    W: Dim + DimSub<D<4>>,
{
    let n = x.shape()[0];
    TypedBlob::from_shape(&[n, x.shape()[1] - 4]).unwrap()
}

fn main() {
    assert_eq!(OFF, 23);
    assert_eq!((Conv1Out::AXIS_C, Conv1Out::DIM_C), (1, 20));
    let c = TypedBlob::<f32, Conv1Out>::new().unwrap();
    let anon: blob!(f32; 64, 20, 24, 24) = c.reshape();
    let mut again = TypedBlob::<f32, Conv1Out>::new().unwrap();
    again.copy_from(&anon, false).unwrap();
    let _ = anon.data_at4::<63, 19, 23, 23>();
    // A count above 4096 into a named shape, and into an anonymous one.
    let flat: TypedBlob<f32, FcIn> = TypedBlob::<f32, Conv1Out>::new().unwrap().reshape();
    let _wide: blob!(f32; 64, 11520) = TypedBlob::<f32, Conv1Out>::new().unwrap().reshape();
    // Flatten past 4096 (VGG's pool5), and AlexNet's pool5 reshaped.
    let vgg = <blob!(f32; _, 512, 7, 7)>::with_dynamic(2).unwrap();
    let fc6_in: blob!(f32; _, 25088) = vgg.flatten().into_shape();
    assert_eq!(fc6_in.shape(), &[2, 25088]);
    let alex: blob!(f32; 2, 9216) = <blob!(f32; 2, 256, 6, 6)>::new().unwrap().reshape();
    let _ = alex.data_at2::<1, 4000>();
    let w = <blob!(f32; 10, 11520)>::new().unwrap();
    let y: blob!(f32; 64, 10) = flat.inner_product(&w).unwrap();
    relu(&y);
    let p = TypedBlob::<f32, Pool2Out>::with_dynamic(7).unwrap();
    let pf: blob!(f32; _, 800) = p.flatten().into_shape();
    let w2 = <blob!(f32; 500, 800)>::new().unwrap();
    let out: blob!(f32; _, 500) = pf.inner_product(&w2).unwrap();
    assert_eq!(out.shape(), &[7, 500]);
    let _d: TypedBlob<f32, (Dyn, D<500>)> = out;
    let logits = Logits::with_dynamic(3).unwrap();
    assert_eq!(logits.shape(), &[3, 10]);
    assert_eq!(Cropped::with_dynamic(1).unwrap().shape(), &[1, 1, 24, 24]);
    assert_eq!(
        <(Dyn, D<1>, D<24>, D<24>) as Shape>::describe(),
        "_ 1 24 24"
    );
    let lin = Linear::<D<16>, D<4>> {
        w: TypedBlob::new().unwrap(),
        b: TypedBlob::new().unwrap(),
    };
    assert_eq!(lin.shapes(), (vec![4, 16], vec![4]));
    let img = <blob!(f32; 2, 28)>::new().unwrap();
    let cropped: blob!(f32; 2, 24) = crop(&img);
    assert_eq!(cropped.shape(), &[2, 24]);
    assert_eq!(c_shape(), 6);
}

fn c_shape() -> usize {
    let a = <blob!(f32; 1, 2, 3, 4)>::new().unwrap();
    a.num() + a.channels() + a.height() - 1 + a.width() - 3
}
