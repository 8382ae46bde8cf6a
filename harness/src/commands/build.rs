//! `lockscale build`: builds the variants and prints one line per binary.

use std::path::Path;

use anyhow::Result;

use crate::builder::{self, BuildRequest};
use crate::cli::BuildArgs;

pub fn build(repo: &Path, a: &BuildArgs) -> Result<i32> {
    let built = builder::build(&BuildRequest {
        repo,
        variants: &a.variants,
        rev: a.rev.as_deref(),
    })?;
    for b in built {
        println!(
            "{}\t{}\t{}\t{}",
            b.variant,
            b.binary.display(),
            b.info.version.as_deref().unwrap_or("(no --version output)"),
            b.info.binary_sha256.as_deref().unwrap_or("")
        );
    }
    Ok(0)
}
