//! Whether the cuDNN on this machine can be used, and if not, why.
//!
//! cudarc resolves each cuDNN function when first called and panics on one
//! the library lacks; its bindings describe cuDNN 9. So before any layer
//! touches cuDNN, [`cudnn`] reads the library's version and resolves every
//! function this build calls ([`CUDNN_FUNCTIONS`]). A library that fails
//! either test is left alone, and convolutions take im2col + cuBLAS, as
//! they do where no cuDNN is installed.

use std::fmt;

/// The cuDNN functions this build calls (through cudarc's safe wrappers),
/// each resolved in the library before cuDNN is used. The CPU CUDA driver
/// of the tests defines exactly these, which its suite checks.
///
/// ```
/// assert!(blob_kernels::cuda::CUDNN_FUNCTIONS.contains(&"cudnnConvolutionForward"));
/// ```
pub const CUDNN_FUNCTIONS: [&str; 23] = [
    "cudnnConvolutionBackwardData",
    "cudnnConvolutionBackwardFilter",
    "cudnnConvolutionForward",
    "cudnnCreate",
    "cudnnCreateConvolutionDescriptor",
    "cudnnCreateFilterDescriptor",
    "cudnnCreateTensorDescriptor",
    "cudnnDestroy",
    "cudnnDestroyConvolutionDescriptor",
    "cudnnDestroyFilterDescriptor",
    "cudnnDestroyTensorDescriptor",
    "cudnnGetConvolutionBackwardDataAlgorithm_v7",
    "cudnnGetConvolutionBackwardDataWorkspaceSize",
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
    "cudnnGetConvolutionBackwardFilterWorkspaceSize",
    "cudnnGetConvolutionForwardAlgorithm_v7",
    "cudnnGetConvolutionForwardWorkspaceSize",
    "cudnnGetVersion",
    "cudnnSetConvolution2dDescriptor",
    "cudnnSetConvolutionMathType",
    "cudnnSetFilter4dDescriptor",
    "cudnnSetStream",
    "cudnnSetTensor4dDescriptor",
];

/// The major version of cuDNN whose API this build's bindings describe.
pub const CUDNN_MAJOR: u32 = 9;

/// A cuDNN library's version, read from `cudnnGetVersion`.
///
/// ```
/// use blob_kernels::cuda::CudnnVersion;
/// assert_eq!(CudnnVersion::from_raw(92100).to_string(), "9.21.0");
/// assert_eq!(CudnnVersion::from_raw(8907).to_string(), "8.9.7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CudnnVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch level.
    pub patch: u32,
}

impl CudnnVersion {
    /// Decodes `cudnnGetVersion`'s number: `major * 1000 + minor * 100 +
    /// patch` up to cuDNN 8, `major * 10000 + minor * 100 + patch` from 9
    /// on (whose minor versions pass 9).
    pub fn from_raw(raw: usize) -> Self {
        let raw = u32::try_from(raw).unwrap_or(u32::MAX);
        if raw >= 10_000 {
            Self {
                major: raw / 10_000,
                minor: raw % 10_000 / 100,
                patch: raw % 100,
            }
        } else {
            Self {
                major: raw / 1000,
                minor: raw % 1000 / 100,
                patch: raw % 100,
            }
        }
    }
}

impl fmt::Display for CudnnVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why cuDNN is not used on this machine.
///
/// ```
/// use blob_kernels::cuda::{CudnnUnavailable, CudnnVersion};
/// let old = CudnnUnavailable::Version(CudnnVersion::from_raw(8907));
/// assert_eq!(old.to_string(), "cuDNN 8.9.7 found, this build calls cuDNN 9's API");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CudnnUnavailable {
    /// Built without the `cudnn` feature.
    #[error("built without the cudnn feature")]
    NotBuilt,
    /// No library named like cuDNN could be loaded.
    #[error("no cuDNN library found (libcudnn.so.9 on LD_LIBRARY_PATH)")]
    NotFound,
    /// The library found under cuDNN's name has no `cudnnGetVersion`.
    #[error("the library found as cuDNN has no cudnnGetVersion")]
    NoVersion,
    /// The library is of another major version than the bindings.
    #[error("cuDNN {0} found, this build calls cuDNN {CUDNN_MAJOR}'s API")]
    Version(CudnnVersion),
    /// The library lacks a function this build calls.
    #[error("cuDNN {version} has no {function}")]
    MissingFunction {
        /// The library's version.
        version: CudnnVersion,
        /// The first function of [`CUDNN_FUNCTIONS`] it lacks.
        function: &'static str,
    },
}

/// Judges a library from its raw version and the first of
/// [`CUDNN_FUNCTIONS`] it lacks, if any.
#[cfg(any(feature = "cudnn", test))]
fn judge(
    raw_version: usize,
    missing: Option<&'static str>,
) -> Result<CudnnVersion, CudnnUnavailable> {
    let version = CudnnVersion::from_raw(raw_version);
    if version.major != CUDNN_MAJOR {
        return Err(CudnnUnavailable::Version(version));
    }
    match missing {
        Some(function) => Err(CudnnUnavailable::MissingFunction { version, function }),
        None => Ok(version),
    }
}

/// The cuDNN this build will use, or why it uses none: checked once per
/// process, without panicking. Convolutions on a GPU go through cuDNN
/// only when this is `Ok`.
///
/// ```
/// match blob_kernels::cuda::cudnn() {
///     Ok(version) => println!("convolutions through cuDNN {version}"),
///     Err(why) => println!("convolutions through im2col + cuBLAS: {why}"),
/// }
/// ```
pub fn cudnn() -> Result<CudnnVersion, CudnnUnavailable> {
    #[cfg(feature = "cudnn")]
    {
        static CHECKED: std::sync::OnceLock<Result<CudnnVersion, CudnnUnavailable>> =
            std::sync::OnceLock::new();
        CHECKED.get_or_init(check_library).clone()
    }
    #[cfg(not(feature = "cudnn"))]
    {
        Err(CudnnUnavailable::NotBuilt)
    }
}

#[cfg(feature = "cudnn")]
fn check_library() -> Result<CudnnVersion, CudnnUnavailable> {
    use cudarc::cudnn::sys;
    // SAFETY: is_culib_present only tries to dlopen the library by name.
    if !unsafe { sys::is_culib_present() } {
        return Err(CudnnUnavailable::NotFound);
    }
    // SAFETY: the library loaded just above, so culib returns it rather
    // than panicking; looking a name up runs no code of the library.
    let library = unsafe { sys::culib() };
    // SAFETY: as above; the pointer type is never called through.
    let lacks = |name: &str| unsafe {
        library
            .get::<*const std::ffi::c_void>(name.as_bytes())
            .is_err()
    };
    if lacks("cudnnGetVersion") {
        return Err(CudnnUnavailable::NoVersion);
    }
    let missing = CUDNN_FUNCTIONS.into_iter().find(|name| lacks(name));
    judge(cudarc::cudnn::result::get_version(), missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_in_both_numberings() {
        let v = |major, minor, patch| CudnnVersion {
            major,
            minor,
            patch,
        };
        assert_eq!(CudnnVersion::from_raw(92100), v(9, 21, 0));
        assert_eq!(CudnnVersion::from_raw(90100), v(9, 1, 0));
        assert_eq!(CudnnVersion::from_raw(8907), v(8, 9, 7));
        assert_eq!(CudnnVersion::from_raw(7605), v(7, 6, 5));
        assert_eq!(CudnnVersion::from_raw(100203), v(10, 2, 3));
    }

    #[test]
    fn only_a_complete_cudnn_9_is_used() {
        assert_eq!(judge(92100, None), Ok(CudnnVersion::from_raw(92100)));
        assert_eq!(judge(90000, None), Ok(CudnnVersion::from_raw(90000)));
        assert_eq!(
            judge(8907, None),
            Err(CudnnUnavailable::Version(CudnnVersion::from_raw(8907)))
        );
        assert_eq!(
            judge(100000, None),
            Err(CudnnUnavailable::Version(CudnnVersion::from_raw(100000)))
        );
        let missing = judge(90100, Some("cudnnSetConvolutionMathType")).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "cuDNN 9.1.0 has no cudnnSetConvolutionMathType"
        );
    }

    #[test]
    fn the_function_list_is_sorted_and_unique() {
        assert!(CUDNN_FUNCTIONS.windows(2).all(|w| w[0] < w[1]));
    }
}
