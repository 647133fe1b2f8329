//! The `weir` program: run graph definitions, inspect a store, benchmark.

use std::process::ExitCode;

/// jemalloc, not glibc's malloc: see the dependency's note in Cargo.toml
/// (`weir bench soak` measures it).
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at its start: a background thread returns
/// unused pages to the system, dirty pages after a second, and no pages
/// linger as "muzzy" (so RSS follows the live heap under a steady load).
#[cfg(all(target_os = "linux", not(target_env = "msvc")))]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> ExitCode {
    weir::cli::main()
}
