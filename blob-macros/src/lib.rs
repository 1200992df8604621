//! The procedural half of blobflow's `blob!`. Do not use this crate
//! directly: `blob_runtime::blob!` (re-exported as `blobflow::blob!`) is a
//! `macro_rules!` that hands this macro its own `$crate`, so the types it
//! writes resolve through whichever crate the user reached `blob!` by: the
//! runtime, `blobflow` under any name, or a crate that re-exports either.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, LitInt, Token, Type, Visibility};

/// Caffe's `kMaxBlobAxes`.
const MAX_AXES: usize = 32;

enum DimKind {
    Literal(u128),
    Dynamic,
    Generic(Ident),
}

struct DimSpec {
    label: Option<Ident>,
    kind: DimKind,
    span: Span,
}

impl Parse for DimSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let label = if (input.peek(Ident) || input.peek(Token![_]))
            && input.peek2(Token![:])
            && !input.peek2(Token![::])
        {
            let l: Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            Some(l)
        } else {
            None
        };
        let span = input.span();
        let kind = if input.peek(Token![_]) {
            input.parse::<Token![_]>()?;
            DimKind::Dynamic
        } else if input.peek(LitInt) {
            let lit: LitInt = input.parse()?;
            if !matches!(lit.suffix(), "" | "usize") {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("a dim is a usize; found the suffix `{}`", lit.suffix()),
                ));
            }
            let v = lit
                .base10_parse::<u128>()
                .map_err(|_| syn::Error::new(lit.span(), "a dim must be a non-negative integer"))?;
            DimKind::Literal(v)
        } else if input.peek(Ident) {
            DimKind::Generic(input.parse()?)
        } else {
            return Err(syn::Error::new(
                span,
                "expected a dim: an integer literal (`64`), `_` for a dim known at run time, \
                 or a type parameter bounded by `Dim`",
            ));
        };
        Ok(Self { label, kind, span })
    }
}

fn parse_dims(input: ParseStream) -> syn::Result<Vec<DimSpec>> {
    let dims: Punctuated<DimSpec, Token![,]> = Punctuated::parse_terminated(input)?;
    let dims: Vec<DimSpec> = dims.into_iter().collect();
    if let Some(extra) = dims.get(MAX_AXES) {
        return Err(syn::Error::new(
            extra.span,
            format!(
                "a blob has at most {MAX_AXES} axes (Caffe's kMaxBlobAxes); this is axis {}",
                MAX_AXES + 1
            ),
        ));
    }
    let mut count: u128 = 1;
    let mut dynamic_seen = false;
    let mut labels: Vec<&Ident> = Vec::new();
    for d in &dims {
        match &d.kind {
            DimKind::Literal(v) => {
                count = count.saturating_mul(*v);
                if count > usize::MAX as u128 {
                    return Err(syn::Error::new(
                        d.span,
                        "the element count overflows usize at this dim",
                    ));
                }
            }
            DimKind::Dynamic => {
                if dynamic_seen {
                    return Err(syn::Error::new(
                        d.span,
                        "at most one dim can be `_` (known at run time): its value is the blob's only run-time dim",
                    ));
                }
                dynamic_seen = true;
            }
            DimKind::Generic(_) => {}
        }
        if let Some(l) = &d.label {
            if labels.contains(&l) {
                return Err(syn::Error::new(
                    l.span(),
                    format!("duplicate dim name `{l}`"),
                ));
            }
            labels.push(l);
        }
    }
    Ok(dims)
}

/// The typenum type of a literal: a binary `UInt` chain, any size.
fn typenum_of(krate: &TokenStream2, v: u128) -> TokenStream2 {
    let mut ty = quote!(#krate::typed::typenum::UTerm);
    if v == 0 {
        return ty;
    }
    let bits = 128 - v.leading_zeros();
    for i in (0..bits).rev() {
        let bit = if (v >> i) & 1 == 1 {
            quote!(#krate::typed::typenum::B1)
        } else {
            quote!(#krate::typed::typenum::B0)
        };
        ty = quote!(#krate::typed::typenum::UInt<#ty, #bit>);
    }
    ty
}

fn dim_types(krate: &TokenStream2, dims: &[DimSpec]) -> (TokenStream2, TokenStream2) {
    let mut tys = Vec::new();
    let mut names = Vec::new();
    for d in dims {
        match &d.kind {
            DimKind::Literal(v) => {
                tys.push(typenum_of(krate, *v));
                let lit = proc_macro2::Literal::usize_unsuffixed(*v as usize);
                names.push(quote!(#krate::typed::D<#lit>));
            }
            DimKind::Dynamic => {
                tys.push(quote!(#krate::typed::Dyn));
                names.push(quote!(#krate::typed::Dyn));
            }
            DimKind::Generic(id) => {
                tys.push(quote!(#id));
                names.push(quote!(#id));
            }
        }
    }
    (quote!((#(#tys,)*)), quote!((#(#names,)*)))
}

struct TypeForm {
    elem: Type,
    dims: Vec<DimSpec>,
}

struct ShapeForm {
    vis: Visibility,
    name: Ident,
    dims: Vec<DimSpec>,
}

enum Input {
    Type(TypeForm),
    Shape(ShapeForm),
}

fn is_shape_keyword(input: ParseStream) -> bool {
    let fork = input.fork();
    let _ = fork.parse::<Visibility>();
    fork.peek(Ident) && fork.parse::<Ident>().is_ok_and(|i| i == "shape") && fork.peek(Ident)
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if is_shape_keyword(input) {
            let vis: Visibility = input.parse()?;
            let _shape: Ident = input.parse()?;
            let name: Ident = input.parse()?;
            input.parse::<Token![=]>().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "expected `=` and the dims: `blob!(shape Name = 64, 3, 32, 32)`",
                )
            })?;
            let dims = parse_dims(input)?;
            for d in &dims {
                if let DimKind::Generic(id) = &d.kind {
                    return Err(syn::Error::new(
                        id.span(),
                        "a named shape takes literal dims or `_`; generic dims belong in `blob!(T; B, K)` inside a generic function",
                    ));
                }
            }
            return Ok(Input::Shape(ShapeForm { vis, name, dims }));
        }
        let elem: Type = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected the element type first: `blob!(f32; 64, 3, 32, 32)`",
            )
        })?;
        input.parse::<Token![;]>().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected `;` between the element type and the dims: `blob!(f32; 64, 3, 32, 32)`",
            )
        })?;
        let dims = parse_dims(input)?;
        Ok(Input::Type(TypeForm { elem, dims }))
    }
}

/// `blob!`'s input after the crate path it is to write its types with.
struct WithCrate {
    krate: TokenStream2,
    input: Input,
}

impl Parse for WithCrate {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut krate = TokenStream2::new();
        while !input.peek(Token![;]) {
            let tt: proc_macro2::TokenTree = input.parse()?;
            krate.extend([tt]);
        }
        input.parse::<Token![;]>()?;
        Ok(Self {
            krate,
            input: input.parse()?,
        })
    }
}

/// The implementation of `blob_runtime::blob!`, which calls it as
/// `blob_with_crate!($crate; ...)`; see that macro for the syntax.
#[proc_macro]
pub fn blob_with_crate(input: TokenStream) -> TokenStream {
    let WithCrate { krate, input } = syn::parse_macro_input!(input as WithCrate);
    let krate = &krate;
    match input {
        Input::Type(TypeForm { elem, dims }) => {
            let (tys, names) = dim_types(krate, &dims);
            if dims.iter().any(|d| matches!(d.kind, DimKind::Generic(_))) {
                // Generic dims: any shape with these dims, whatever its
                // name (a declared shape, a literal one, a derived one).
                quote!(#krate::typed::TypedBlob<#elem, impl #krate::typed::Shape<Dims = #tys>>)
                    .into()
            } else {
                quote!(#krate::typed::TypedBlob<#elem, #krate::typed::Shp<#tys, #names>>).into()
            }
        }
        Input::Shape(ShapeForm { vis, name, dims }) => {
            let (tys, _) = dim_types(krate, &dims);
            let name_str = name.to_string();
            let axes = dims.iter().enumerate().filter_map(|(i, d)| {
                d.label.as_ref().map(|l| {
                    let upper = Ident::new(&l.to_string().to_uppercase(), l.span());
                    let doc = format!("Index of the `{l}` axis.");
                    quote_spanned!(l.span()=> #[doc = #doc] pub const #upper: usize = #i;)
                })
            });
            let doc = format!("The shape `{name_str}`, declared with `blob!`.");
            quote! {
                #[doc = #doc]
                #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
                #vis struct #name;

                impl #krate::typed::Shape for #name {
                    type Dims = #tys;
                    type Name = #name;
                    const DECLARED_NAME: ::core::option::Option<&'static str> =
                        ::core::option::Option::Some(#name_str);
                }

                #[allow(dead_code)]
                impl #name {
                    #(#axes)*
                }
            }
            .into()
        }
    }
}
