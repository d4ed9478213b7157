//! `arca version`: the version and the platform it was built for, as text or (`--json`) as one
//! JSON object, as restic's `version` prints them.

use anyhow::Result;
use clap::Args;
use serde_json::json;

/// Options of `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

/// Runs `version`.
pub fn run(a: &VersionArgs) -> Result<u8> {
    let (version, os, arch) = (
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
    );
    if a.json {
        super::out(
            &json!({"message_type": "version", "version": version, "os": os, "arch": arch})
                .to_string(),
        )?;
    } else {
        super::out(&format!("arca {version} compiled for {os}/{arch}"))?;
    }
    Ok(0)
}
