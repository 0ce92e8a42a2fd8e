//! Integration tests of the tool host live in `all/` (one test binary); the
//! guest components they run are built from `fixtures/` by `build.rs`.
//!
//! This library is empty: a package needs one target besides its tests.
