//! Integration tests: each spawns the `gimlet` binary and speaks MCP to it as a client would.
//! One test binary, so it links once.

#![allow(unreachable_pub, reason = "helpers shared across the suite's modules")]

mod common;
mod suite;
