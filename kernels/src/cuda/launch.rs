//! Kernel sources and their typed launchers.
//!
//! Every `.cu` file is declared once with [`cuda_kernels!`](crate::cuda_kernels):
//! the file, and each kernel's name and Rust parameter list. From that one
//! declaration come the typed launcher functions and the signature list
//! ([`KernelSource::kernels`]) that the loader and the tests hold against
//! the PTX NVRTC produced: the names of its `.entry` points and the types
//! of their `.param`s. A kernel renamed in a `.cu` file, a parameter added
//! or a launcher that pushes the wrong types is caught by
//! [`KernelSource::check_ptx`] without a GPU.

use cudarc::driver::{CudaView, CudaViewMut, DeviceRepr, LaunchArgs, LaunchConfig};
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use super::CudaError;

/// Threads per block of the element-wise kernels (Caffe's
/// `CAFFE_CUDA_NUM_THREADS`).
pub const THREADS: u32 = 512;

/// The launch shape of the grid-stride kernels: 512 threads per block and
/// enough blocks for `n` elements (capped; the loops cover the rest).
///
/// ```
/// let c = blob_kernels::cuda::launch_config(1000);
/// assert_eq!((c.grid_dim.0, c.block_dim.0), (2, 512));
/// ```
pub fn launch_config(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(THREADS as usize).clamp(1, 65_535 * 32) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The type of one kernel parameter as PTX declares it (`.param .u64`).
/// Pointers are `.u64` in PTX, as are 64-bit integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxType {
    /// `.u32`: `int`, `unsigned int`.
    U32,
    /// `.u64`: `long long`, and every pointer.
    U64,
    /// `.f32`: `float`.
    F32,
    /// `.f64`: `double`.
    F64,
}

impl PtxType {
    /// The PTX spelling, e.g. `"u64"`.
    ///
    /// ```
    /// assert_eq!(blob_kernels::cuda::PtxType::F32.name(), "f32");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::F32 => "f32",
            Self::F64 => "f64",
        }
    }

    /// The width class of a PTX `.param` type: signed, unsigned and
    /// untyped integers of one width are the same argument.
    fn normalize(ptx: &str) -> &str {
        match ptx {
            "s32" | "b32" => "u32",
            "s64" | "b64" => "u64",
            other => other,
        }
    }
}

/// A value a launcher passes to a kernel: its PTX type, and how it is
/// pushed onto cudarc's argument list.
pub trait KernelArg {
    /// The PTX type of the parameter this argument fills.
    const PTX: PtxType;
    #[doc(hidden)]
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>);
}

macro_rules! scalar_arg {
    ($($t:ty => $p:ident),*) => {$(
        impl KernelArg for $t {
            const PTX: PtxType = PtxType::$p;
            fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
                use cudarc::driver::PushKernelArg;
                args.arg(&*self);
            }
        }
    )*};
}
scalar_arg!(i32 => U32, u32 => U32, i64 => U64, u64 => U64, f32 => F32, f64 => F64);

impl<T: DeviceRepr> KernelArg for &CudaView<'_, T> {
    const PTX: PtxType = PtxType::U64;
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        use cudarc::driver::PushKernelArg;
        args.arg(*self);
    }
}

impl<T: DeviceRepr> KernelArg for &mut CudaViewMut<'_, T> {
    const PTX: PtxType = PtxType::U64;
    fn push<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        use cudarc::driver::PushKernelArg;
        args.arg(&mut **self);
    }
}

/// One kernel: its `extern "C"` name and parameter types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSig {
    /// The name, as the PTX `.entry`.
    pub name: &'static str,
    /// The parameter types, in order.
    pub params: &'static [PtxType],
}

/// A `.cu` file and the kernels its launchers call.
#[derive(Debug)]
pub struct KernelSource {
    /// The file name, for messages.
    pub file: &'static str,
    /// The CUDA C++ text.
    pub text: &'static str,
    /// Each declared kernel's instances: one for a plain kernel, the `f32`
    /// and `f64` ones for a kernel declared generic.
    pub kernels: &'static [&'static [KernelSig]],
}

/// A kernel as the PTX defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// The `.entry` name.
    pub name: String,
    /// The `.param` types as PTX spells them (`"u64"`), integer types of one
    /// width folded into `u32`/`u64`.
    pub params: Vec<String>,
}

/// The PTX's `.version` (its ISA), e.g. `"9.0"`: the oldest CUDA driver
/// that loads it follows from it.
pub(crate) fn ptx_isa(ptx: &str) -> String {
    ptx.lines()
        .find_map(|line| line.trim().strip_prefix(".version "))
        .map_or_else(|| "of no stated version".into(), |v| v.trim().to_owned())
}

/// The `.visible .entry` points of a PTX text, with their parameter types.
///
/// ```
/// let ptx = ".visible .entry scale_f32(\n\t.param .u64 scale_f32_param_0,\n\t.param .f32 scale_f32_param_1\n)\n{\n}";
/// let e = blob_kernels::cuda::ptx_entries(ptx);
/// assert_eq!(e[0].name, "scale_f32");
/// assert_eq!(e[0].params, ["u64", "f32"]);
/// ```
pub fn ptx_entries(ptx: &str) -> Vec<PtxEntry> {
    let mut entries = Vec::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix(".visible .entry ") else {
            continue;
        };
        let (name, after) = rest.split_once('(').unwrap_or((rest, ""));
        let mut entry = PtxEntry {
            name: name.trim().to_string(),
            params: Vec::new(),
        };
        let mut closed = after.contains(')');
        while !closed {
            let Some(p) = lines.next() else { break };
            let p = p.trim();
            closed = p.starts_with(')') || p.ends_with(')');
            if let Some(decl) = p.strip_prefix(".param .") {
                let ty = decl.split_whitespace().next().unwrap_or("");
                entry.params.push(PtxType::normalize(ty).to_string());
            }
        }
        entries.push(entry);
    }
    entries
}

fn describe<S: AsRef<str>>(params: impl IntoIterator<Item = S>) -> String {
    let names: Vec<String> = params.into_iter().map(|p| p.as_ref().to_string()).collect();
    format!("({})", names.join(", "))
}

impl KernelSource {
    /// Every kernel the launchers of this source call.
    ///
    /// ```
    /// # #[cfg(feature = "cuda")] {
    /// let names: Vec<_> = blob_kernels::cuda::RNG.sigs().map(|s| s.name).collect();
    /// assert!(names.contains(&"bernoulli_u32"));
    /// # }
    /// ```
    pub fn sigs(&self) -> impl Iterator<Item = &'static KernelSig> {
        self.kernels.iter().flat_map(|k| k.iter())
    }

    /// Compiles the source to PTX with NVRTC (no GPU needed).
    ///
    /// ```no_run
    /// let ptx = blob_kernels::cuda::ELEMENTWISE.compile()?;
    /// assert!(ptx.contains(".entry"));
    /// # Ok::<(), blob_kernels::cuda::CudaError>(())
    /// ```
    pub fn compile(&self) -> Result<String, CudaError> {
        if !super::nvrtc_available() {
            return Err(CudaError::NoNvrtc);
        }
        let opts = CompileOptions {
            use_fast_math: Some(false),
            name: Some(self.file.to_string()),
            ..Default::default()
        };
        compile_ptx_with_opts(self.text, opts)
            .map(|ptx| ptx.to_src())
            .map_err(|source| {
                let log = match &source {
                    CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                    other => format!("{other:?}"),
                };
                CudaError::Compile {
                    file: self.file,
                    log,
                    source,
                }
            })
    }

    /// Holds the declared kernels against a PTX text in both directions:
    /// every declared kernel is an `.entry` with the same parameter types,
    /// and every `.entry` is declared. The error lists each difference.
    ///
    /// ```
    /// use blob_kernels::cuda::{KernelSig, KernelSource, PtxType};
    /// static SRC: KernelSource = KernelSource {
    ///     file: "x.cu",
    ///     text: "",
    ///     kernels: &[&[KernelSig { name: "f", params: &[PtxType::U64] }]],
    /// };
    /// let ok = ".visible .entry f(\n.param .u64 f_param_0\n)";
    /// assert!(SRC.check_ptx(ok).is_ok());
    /// let renamed = ".visible .entry g(\n.param .u64 g_param_0\n)";
    /// let err = SRC.check_ptx(renamed).unwrap_err().to_string();
    /// assert!(err.contains("f is launched but not defined") && err.contains("g is defined but no launcher"), "{err}");
    /// ```
    pub fn check_ptx(&self, ptx: &str) -> Result<(), CudaError> {
        let entries = ptx_entries(ptx);
        let mut problems = Vec::new();
        for sig in self.sigs() {
            match entries.iter().find(|e| e.name == sig.name) {
                None => problems.push(format!("{} is launched but not defined", sig.name)),
                Some(e)
                    if !e
                        .params
                        .iter()
                        .map(String::as_str)
                        .eq(sig.params.iter().map(|p| p.name())) =>
                {
                    problems.push(format!(
                        "{}: the launcher pushes {} but the kernel takes {}",
                        sig.name,
                        describe(sig.params.iter().map(|p| p.name())),
                        describe(&e.params)
                    ))
                }
                Some(_) => {}
            }
        }
        for e in &entries {
            if !self.sigs().any(|s| s.name == e.name) {
                problems.push(format!("{} is defined but no launcher calls it", e.name));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CudaError::KernelMismatch {
                file: self.file,
                detail: problems.join("; "),
            })
        }
    }
}

/// The signature list of one declared kernel (used by
/// [`cuda_kernels!`](crate::cuda_kernels)).
#[doc(hidden)]
#[macro_export]
macro_rules! __cuda_kernel_sigs {
    ($name:ident < $t:ident > ($($ty:ty),*)) => {
        &[
            {
                #[allow(dead_code)]
                type $t = f32;
                $crate::cuda::KernelSig {
                    name: concat!(stringify!($name), "_f32"),
                    params: &[$(<$ty as $crate::cuda::KernelArg>::PTX),*],
                }
            },
            {
                #[allow(dead_code)]
                type $t = f64;
                $crate::cuda::KernelSig {
                    name: concat!(stringify!($name), "_f64"),
                    params: &[$(<$ty as $crate::cuda::KernelArg>::PTX),*],
                }
            },
        ]
    };
    ($name:ident ($($ty:ty),*)) => {
        &[$crate::cuda::KernelSig {
            name: stringify!($name),
            params: &[$(<$ty as $crate::cuda::KernelArg>::PTX),*],
        }]
    };
}

/// Looks the kernel up, pushes the arguments and launches (the body of
/// every launcher).
#[doc(hidden)]
#[macro_export]
macro_rules! __cuda_launch {
    ($gpu:ident, $source:ident, $kernel:ident, $config:ident, $($arg:ident),*) => {{
        let function = $gpu.function(&$source, $kernel)?;
        let mut args = $gpu.stream().launch_builder(&function);
        $( $crate::cuda::KernelArg::push(&mut $arg, &mut args); )*
        // SAFETY: the parameter types are the kernel's (checked against the
        // PTX when the module loads); the caller guarantees the sizes.
        unsafe { args.launch($config) }
            .map(drop)
            .map_err(|source| $crate::cuda::CudaError::Launch { kernel: $kernel, source })
    }};
}

/// The launcher of one declared kernel (used by
/// [`cuda_kernels!`](crate::cuda_kernels)).
#[doc(hidden)]
#[macro_export]
macro_rules! __cuda_kernel_launcher {
    ($source:ident, $(#[$meta:meta])* $vis:vis $name:ident < $t:ident > ($($arg:ident : $ty:ty),*)) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// Every buffer must hold the elements the kernel reads or writes
        /// for these arguments.
        #[allow(clippy::too_many_arguments, dead_code, unused_mut)]
        $vis unsafe fn $name<$t: $crate::cuda::GpuReal>(
            gpu: &$crate::cuda::Gpu,
            config: $crate::cuda::cudarc::driver::LaunchConfig,
            $(mut $arg: $ty),*
        ) -> ::core::result::Result<(), $crate::cuda::CudaError> {
            const NAMES: [&str; 2] = [
                concat!(stringify!($name), "_f32"),
                concat!(stringify!($name), "_f64"),
            ];
            let kernel = NAMES[<$t as $crate::cuda::GpuReal>::INDEX];
            $crate::__cuda_launch!(gpu, $source, kernel, config, $($arg),*)
        }
    };
    ($source:ident, $(#[$meta:meta])* $vis:vis $name:ident ($($arg:ident : $ty:ty),*)) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// Every buffer must hold the elements the kernel reads or writes
        /// for these arguments.
        #[allow(clippy::too_many_arguments, dead_code, unused_mut)]
        $vis unsafe fn $name(
            gpu: &$crate::cuda::Gpu,
            config: $crate::cuda::cudarc::driver::LaunchConfig,
            $(mut $arg: $ty),*
        ) -> ::core::result::Result<(), $crate::cuda::CudaError> {
            let kernel = stringify!($name);
            $crate::__cuda_launch!(gpu, $source, kernel, config, $($arg),*)
        }
    };
}

/// Declares a `.cu` file and its kernels: a [`KernelSource`] static and one
/// typed, `unsafe` launcher function per kernel, taking the [`Gpu`](crate::cuda::Gpu),
/// a launch configuration and the kernel's arguments.
///
/// A kernel declared `fn name<T>(..)` stands for the two kernels
/// `name_f32` and `name_f64` of the source, `T` being the element type;
/// its launcher is generic over [`GpuReal`](crate::cuda::GpuReal).
/// Parameters are `i32`, `u32`, `i64`, `u64`, `f32`, `f64`, `&CudaView<'_, T>`
/// (a `const T*`) or `&mut CudaViewMut<'_, T>` (a `T*`).
///
/// The file is read with `include_str!`, relative to the source file that
/// invokes the macro; so this example, whose `scale.cu` would sit beside
/// it, is shown rather than compiled (`rng.rs` in this crate is a real one).
///
/// ```ignore
/// blob_kernels::cuda_kernels! {
///     pub(crate) static SCALE = "scale.cu";
///     /// `y[i] *= alpha`.
///     pub(crate) fn scale<T>(n: i64, alpha: T, y: &mut CudaViewMut<'_, T>);
/// }
/// ```
#[macro_export]
macro_rules! cuda_kernels {
    (
        $(#[$smeta:meta])*
        $svis:vis static $source:ident = $file:literal;
        $( $(#[$kmeta:meta])* $kvis:vis fn $name:ident $(< $t:ident >)? ( $($arg:ident : $ty:ty),* $(,)? ); )*
    ) => {
        $(#[$smeta])*
        $svis static $source: $crate::cuda::KernelSource = $crate::cuda::KernelSource {
            file: $file,
            text: include_str!($file),
            kernels: &[ $( $crate::__cuda_kernel_sigs!($name $(< $t >)? ($($ty),*)) ),* ],
        };
        $( $crate::__cuda_kernel_launcher!($source, $(#[$kmeta])* $kvis $name $(< $t >)? ($($arg : $ty),*)); )*
    };
}

#[cfg(test)]
mod tests {
    use super::ptx_isa;

    #[test]
    fn the_isa_is_the_version_line() {
        let ptx = "//\n// Generated by NVIDIA NVVM Compiler\n.version 9.1\n.target sm_75\n";
        assert_eq!(ptx_isa(ptx), "9.1");
        assert_eq!(ptx_isa(".target sm_75\n"), "of no stated version");
    }
}
