//! The procedural half of blobflow's `blob!`. Do not use this crate
//! directly: `blob_runtime::blob!` (re-exported as `blobflow::blob!`) is a
//! `macro_rules!` that hands this macro its own `$crate`, so the types it
//! writes resolve through whichever crate the user reached `blob!` by: the
//! runtime, `blobflow` under any name, or a crate that re-exports either.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Ident, Lit, Token, Type, Visibility};

/// Caffe's `kMaxBlobAxes`.
const MAX_AXES: usize = 32;

/// One dim as written.
enum DimKind {
    /// `64`.
    Literal(u128),
    /// `_`.
    Dynamic,
    /// A value known at compile time that the macro cannot read: a named
    /// constant (`CLASSES`) or a constant expression (`{ H - 4 }`, `4 * 8`).
    Const(TokenStream2),
    /// A type: a generic dim (`K`) or type-level arithmetic on one (`H - 4`).
    Type(TokenStream2),
}

struct DimSpec {
    label: Option<Ident>,
    kind: DimKind,
    span: Span,
}

/// A constant's name (`CLASSES`, `H2`) rather than a type parameter (`K`,
/// `Batch`): two or more characters, no lower-case letter.
fn is_const_name(id: &Ident) -> bool {
    let s = id.to_string();
    s.chars().count() >= 2 && !s.chars().any(|c| c.is_lowercase())
}

/// Whether `e` names a type parameter anywhere (then it is type-level
/// arithmetic; otherwise a constant expression).
fn mentions_type(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.path.get_ident().is_some_and(|id| !is_const_name(id)),
        Expr::Binary(b) => mentions_type(&b.left) || mentions_type(&b.right),
        Expr::Paren(p) => mentions_type(&p.expr),
        Expr::Group(g) => mentions_type(&g.expr),
        _ => false,
    }
}

fn literal(lit: &syn::LitInt) -> syn::Result<u128> {
    if !matches!(lit.suffix(), "" | "usize") {
        return Err(syn::Error::new(
            lit.span(),
            format!("a dim is a usize; found the suffix `{}`", lit.suffix()),
        ));
    }
    lit.base10_parse::<u128>()
        .map_err(|_| syn::Error::new(lit.span(), "a dim must be a non-negative integer"))
}

/// The text of `e` when it reads as a run-time value rather than a dim: a
/// snake_case name (`batch`: constants are UPPER_CASE and type
/// parameters CamelCase), a field (`args.batch`), or a call.
fn run_time_value(e: &Expr) -> Option<String> {
    let snake = |id: &Ident| id.to_string().starts_with(|c: char| c.is_lowercase());
    match e {
        Expr::Path(p) if p.path.get_ident().is_some_and(snake) => {
            Some(p.path.get_ident()?.to_string())
        }
        Expr::Field(_) | Expr::MethodCall(_) | Expr::Call(_) | Expr::Index(_) => {
            Some(e.to_token_stream().to_string().replace(' ', ""))
        }
        _ => None,
    }
}

const EXPECTED_DIM: &str = "expected a dim: an integer literal (`64`), `_` for a dim known at run time, \
     a constant (`CLASSES`, `{ H - 4 }`), or a type parameter bounded by `Dim` (`K`, `H - 4`)";

/// The dim type of a type-level expression: `D<4>`, `K`, or
/// `<H as DimSub<D<4>>>::Output`.
fn type_expr(krate: &TokenStream2, e: &Expr) -> syn::Result<TokenStream2> {
    Ok(match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => static_dim(krate, literal(i)?),
            other => return Err(syn::Error::new(other.span(), EXPECTED_DIM)),
        },
        Expr::Path(p) => match p.path.get_ident() {
            Some(id) if is_const_name(id) => quote!(#krate::typed::D<#id>),
            Some(id) => quote!(#id),
            None => return Err(syn::Error::new(p.span(), EXPECTED_DIM)),
        },
        Expr::Paren(p) => type_expr(krate, &p.expr)?,
        Expr::Group(g) => type_expr(krate, &g.expr)?,
        Expr::Binary(b) => {
            let op = match b.op {
                BinOp::Add(_) => quote!(Plus),
                BinOp::Sub(_) => quote!(Minus),
                BinOp::Mul(_) => quote!(Times),
                BinOp::Div(_) => quote!(Over),
                other => {
                    return Err(syn::Error::new(other.span(), "dims take +, -, * and /"));
                }
            };
            let (l, r) = (type_expr(krate, &b.left)?, type_expr(krate, &b.right)?);
            quote!(#krate::typed::#op<#l, #r>)
        }
        other => return Err(syn::Error::new(other.span(), EXPECTED_DIM)),
    })
}

impl DimSpec {
    fn parse_with(input: ParseStream) -> syn::Result<Self> {
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
        if input.peek(Token![_]) {
            input.parse::<Token![_]>()?;
            return Ok(Self {
                label,
                kind: DimKind::Dynamic,
                span,
            });
        }
        let expr: Expr = input
            .parse()
            .map_err(|e| syn::Error::new(e.span(), EXPECTED_DIM))?;
        if let Some(value) = run_time_value(&expr) {
            return Err(syn::Error::new(
                expr.span(),
                format!(
                    "`{value}` looks like a value known only at run time, and a type's dims are \
                     known when the program compiles: write `_` for that dim and give its value \
                     when the blob is made (`with_dynamic({value})`, `from_shape(..)`)"
                ),
            ));
        }
        let kind = match &expr {
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => DimKind::Literal(literal(i)?),
                other => return Err(syn::Error::new(other.span(), EXPECTED_DIM)),
            },
            Expr::Block(b) => {
                let inner = &b.block;
                DimKind::Const(quote!(#inner))
            }
            Expr::Unary(u) => {
                return Err(syn::Error::new(
                    u.span(),
                    "a dim must be a non-negative integer",
                ));
            }
            e if mentions_type(e) => DimKind::Type(TokenStream2::new()),
            Expr::Path(_) | Expr::Binary(_) | Expr::Paren(_) => DimKind::Const(quote!({ #expr })),
            other => return Err(syn::Error::new(other.span(), EXPECTED_DIM)),
        };
        let kind = match kind {
            // Resolved once the crate path is known, in `dim_type`.
            DimKind::Type(_) => DimKind::Type(expr.into_token_stream()),
            k => k,
        };
        Ok(Self { label, kind, span })
    }
}

impl Parse for DimSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        Self::parse_with(input)
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
            DimKind::Const(_) | DimKind::Type(_) => {}
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

/// The largest dim written `D<N>`: blob-runtime's `TWIN_MAX`, the end of
/// its compile-time arithmetic table (`tests/typed.rs` holds the two
/// equal).
const TWIN_MAX: u128 = 4096;

/// The dim type of a literal: `D<N>` up to [`TWIN_MAX`], above it
/// `Thousands<N / 1000, N % 1000>`, the one form compile-time arithmetic
/// gives such a number, so that written and computed dims are one type.
fn static_dim(krate: &TokenStream2, v: u128) -> TokenStream2 {
    if v <= TWIN_MAX {
        let lit = proc_macro2::Literal::u128_unsuffixed(v);
        quote!(#krate::typed::D<#lit>)
    } else {
        let hi = static_dim(krate, v / 1000);
        let lo = static_dim(krate, v % 1000);
        quote!(#krate::typed::Thousands<#hi, #lo>)
    }
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

fn dim_type(krate: &TokenStream2, d: &DimSpec) -> syn::Result<TokenStream2> {
    Ok(match &d.kind {
        DimKind::Literal(v) => {
            let ty = static_dim(krate, *v);
            quote_spanned!(d.span=> #ty)
        }
        DimKind::Dynamic => quote_spanned!(d.span=> #krate::typed::Dyn),
        DimKind::Const(e) => quote_spanned!(d.span=> #krate::typed::D<#e>),
        DimKind::Type(e) => type_expr(krate, &syn::parse2(e.clone())?)?,
    })
}

fn dims_tuple(krate: &TokenStream2, dims: &[DimSpec]) -> syn::Result<TokenStream2> {
    let tys = dims
        .iter()
        .map(|d| dim_type(krate, d))
        .collect::<syn::Result<Vec<_>>>()?;
    Ok(quote!((#(#tys,)*)))
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
                if let DimKind::Type(e) = &d.kind {
                    return Err(syn::Error::new(
                        e.span(),
                        "a named shape takes literal dims, constants or `_`; generic dims belong in `blob!(T; B, K)`",
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

/// The counts of a named shape: exact typenum integers when every dim is
/// a literal (any size), the dims' own compile-time counts otherwise; and
/// the count as messages print it.
fn named_counts(
    krate: &TokenStream2,
    dims: &[DimSpec],
    tys: &TokenStream2,
) -> (TokenStream2, TokenStream2) {
    let statics: Vec<&DimSpec> = dims
        .iter()
        .filter(|d| !matches!(d.kind, DimKind::Dynamic))
        .collect();
    let dynamic = dims.len() - statics.len();
    let literals: Option<u128> = statics.iter().try_fold(1u128, |acc, d| match d.kind {
        DimKind::Literal(v) => Some(acc.saturating_mul(v)),
        _ => None,
    });
    match literals {
        Some(count) => {
            let count_ty = typenum_of(krate, count);
            let dyn_ty = typenum_of(krate, dynamic as u128);
            let lit = proc_macro2::Literal::u128_unsuffixed(count);
            (
                quote!(#krate::typed::CountedAs<#count_ty, #dyn_ty>),
                quote!(#krate::typed::D<#lit>),
            )
        }
        None => {
            let factors = statics.iter().map(|d| match &d.kind {
                DimKind::Literal(v) => {
                    let lit = proc_macro2::Literal::u128_unsuffixed(*v);
                    quote!((#lit))
                }
                DimKind::Const(e) => quote!((#e)),
                _ => unreachable!("named shapes hold literals, constants and `_`"),
            });
            (quote!(#tys), quote!(#krate::typed::D<{ 1 #(* #factors)* }>))
        }
    }
}

/// The implementation of `blob_runtime::blob!`, which calls it as
/// `blob_with_crate!($crate; ...)`; see that macro for the syntax.
#[proc_macro]
pub fn blob_with_crate(input: TokenStream) -> TokenStream {
    let WithCrate { krate, input } = syn::parse_macro_input!(input as WithCrate);
    let krate = &krate;
    let out = match input {
        Input::Type(TypeForm { elem, dims }) => {
            dims_tuple(krate, &dims).map(|tys| quote!(#krate::typed::TypedBlob<#elem, #tys>))
        }
        Input::Shape(ShapeForm { vis, name, dims }) => {
            dims_tuple(krate, &dims).map(|tys| named_shape(krate, vis, name, &dims, tys))
        }
    };
    out.unwrap_or_else(syn::Error::into_compile_error).into()
}

fn named_shape(
    krate: &TokenStream2,
    vis: Visibility,
    name: Ident,
    dims: &[DimSpec],
    tys: TokenStream2,
) -> TokenStream2 {
    let name_str = name.to_string();
    let (counts, count_name) = named_counts(krate, dims, &tys);
    let axes = dims.iter().enumerate().filter_map(|(i, d)| {
        let l = d.label.as_ref()?;
        let upper = l.to_string().to_uppercase();
        let axis = Ident::new(&format!("AXIS_{upper}"), l.span());
        let doc = format!("Index of the `{l}` axis.");
        let value = match &d.kind {
            DimKind::Literal(v) => {
                let lit = proc_macro2::Literal::u128_unsuffixed(*v);
                Some(quote!(#lit))
            }
            DimKind::Const(e) => Some(quote!(#e)),
            _ => None,
        };
        let dim = value.map(|v| {
            let id = Ident::new(&format!("DIM_{upper}"), l.span());
            let doc = format!("The value of the `{l}` dim.");
            quote_spanned!(l.span()=> #[doc = #doc] pub const #id: usize = #v;)
        });
        Some(quote_spanned!(l.span()=> #[doc = #doc] pub const #axis: usize = #i; #dim))
    });
    let doc = format!("The shape `{name_str}`, declared with `blob!`: a name at the type level.");
    // No derives: a shape is never a value, and seven derives on each of
    // a net's shapes were a third of a typed crate's build.
    quote! {
        #[doc = #doc]
        #vis struct #name;

        impl #krate::typed::Shape for #name {
            type Dims = #tys;
            type Counts = #counts;
            type CountName = #count_name;
            const DECLARED_NAME: ::core::option::Option<&'static str> =
                ::core::option::Option::Some(#name_str);
        }

        #[allow(dead_code)]
        impl #name {
            #(#axes)*
        }
    }
}
