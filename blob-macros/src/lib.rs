//! blob-macros
