//! Creating a missing bucket for `init`: one signed `PUT /bucket` (CreateBucket), with the
//! same credential chain (environment, profile files) and HTTP client opendal uses.

use std::time::Duration;

use reqsign_aws_v4::{DefaultCredentialProvider, RequestSigner, StaticCredentialProvider};
use reqsign_core::{Context, OsEnv, ProvideCredentialChain, Signer};
use reqsign_file_read_tokio::TokioFileRead;

/// What creating the bucket needs.
pub(crate) struct CreateBucket<'a> {
    /// `https://host/bucket` (path-style) or `https://bucket.host/` (virtual-hosted).
    pub url: String,
    pub region: &'a str,
    pub profile: Option<&'a str>,
    pub credentials: Option<(&'a str, &'a str)>,
    pub timeout: Duration,
}

/// Sends CreateBucket; `Ok(())` also when the bucket turns out to exist and be ours.
pub(crate) async fn create_bucket(c: CreateBucket<'_>) -> Result<(), String> {
    let ctx = Context::new().with_file_read(TokioFileRead).with_env(OsEnv);
    let mut chain = ProvideCredentialChain::new();
    if let Some((id, secret)) = c.credentials {
        chain = chain.push(StaticCredentialProvider::new(id, secret));
    }
    let mut defaults = DefaultCredentialProvider::builder();
    if let Some(p) = c.profile {
        defaults = defaults.with_profile(p);
    }
    chain = chain.push(defaults.no_imds().build());
    let signer = Signer::new(ctx, chain, RequestSigner::new("s3", c.region));
    // us-east-1 is the default location and must not be named.
    let body = if c.region == "us-east-1" {
        String::new()
    } else {
        format!(
            "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
             <LocationConstraint>{}</LocationConstraint></CreateBucketConfiguration>",
            c.region
        )
    };
    let req = http::Request::builder()
        .method(http::Method::PUT)
        .uri(&c.url)
        .header("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
        .header("content-length", body.len().to_string())
        .body(())
        .map_err(|e| format!("invalid bucket URL {}: {e}", c.url))?;
    let (mut parts, ()) = req.into_parts();
    signer
        .sign(&mut parts, None)
        .await
        .map_err(|e| format!("cannot sign the request: {e}"))?;
    let client = reqwest::Client::builder()
        .timeout(c.timeout)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let resp = client
        .request(parts.method, c.url.as_str())
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|e| format!("cannot send CreateBucket: {e}"))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let text = resp.text().await.unwrap_or_default();
    if text.contains("BucketAlreadyOwnedByYou") {
        return Ok(());
    }
    let code = text
        .split("<Code>")
        .nth(1)
        .and_then(|r| r.split("</Code>").next())
        .unwrap_or("");
    Err(format!(
        "the server refused to create the bucket ({status} {code})"
    ))
}
