//! The repository location and the global options as users type them: spaces around a
//! backend option's key and value.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Env, stderr};

/// `-o " key = value "` (a space left after a comma in a script, or around `=`) is the
/// option: it was refused as an unknown key (exit 2).
#[test]
fn spaces_around_a_backend_options_key_and_value_are_ignored() {
    let e = Env::new();
    e.init(&[]);
    for opt in [
        " s3.region=eu-west-1",
        "s3.region =eu-west-1",
        " sftp.timeout = 30s ",
    ] {
        let o = e.run(&["-o", opt, "snapshots"]);
        assert_eq!(o.status.code(), Some(0), "{opt:?}: {}", stderr(&o));
    }
    // An unknown key is still refused, named without its spaces.
    let o = e.run(&["-o", " s3.regio = x", "snapshots"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown key \"s3.regio\""),
        "{}",
        stderr(&o)
    );
}
