#![no_std]
// The library target exists so that vmscope/build.rs can name this crate as a
// build-dependency; the programs live in the binary target.
