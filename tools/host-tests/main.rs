// SPDX-License-Identifier: GPL-2.0

//! Host unit tests: the module's pure code (no kernel dependencies), compiled with the build
//! root's rustc as a normal test binary. Run by `make host-test` and `make check`.

#![allow(dead_code, unreachable_pub)]

#[path = "../../rust/proto/mod.rs"]
mod proto;
