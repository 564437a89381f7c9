//! The `reel` binary: parses the CLI and config, builds the runtime and runs.
use mimalloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> anyhow::Result<()> {
    Ok(())
}
