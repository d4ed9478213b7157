//! Query strings read as bytes, so that a snapshot path with names that are not UTF-8 travels
//! in a URL (`?path=/a/%E9t%E9`) and comes back exactly.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::state::ApiError;

/// The pairs of a query string, values as raw bytes.
#[derive(Debug, Default, Clone)]
pub struct RawQuery(pub Vec<(String, Vec<u8>)>);

fn decode(s: &str) -> Vec<u8> {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus).collect()
}

impl RawQuery {
    /// Parses `a=1&b=%E9`.
    pub fn parse(q: &str) -> Self {
        RawQuery(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (String::from_utf8_lossy(&decode(k)).into_owned(), decode(v)),
                    None => (String::from_utf8_lossy(&decode(p)).into_owned(), vec![]),
                })
                .collect(),
        )
    }

    /// The first value of `key`, as bytes.
    pub fn bytes(&self, key: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    /// The first value of `key` as text (invalid UTF-8 replaced); empty values count as absent.
    pub fn text(&self, key: &str) -> Option<String> {
        self.bytes(key)
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// Every value of `key`, empty ones too, as bytes.
    pub fn every(&self, key: &str) -> Vec<Vec<u8>> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// This query without the empty values of `key`.
    pub fn without_empty(&self, key: &str) -> RawQuery {
        RawQuery(
            self.0
                .iter()
                .filter(|(k, v)| k != key || !v.is_empty())
                .cloned()
                .collect(),
        )
    }

    /// Every non-empty value of `key`, as bytes.
    pub fn all(&self, key: &str) -> Vec<Vec<u8>> {
        let mut v = self.every(key);
        v.retain(|v| !v.is_empty());
        v
    }
}

impl<S: Send + Sync> FromRequestParts<S> for RawQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(RawQuery::parse(parts.uri.query().unwrap_or("")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_survive() {
        let q = RawQuery::parse("path=/a/%E9t%E9&x=1+2&path=/b&empty=&flag");
        assert_eq!(q.bytes("path"), Some(&b"/a/\xe9t\xe9"[..]));
        assert_eq!(q.all("path").len(), 2);
        assert_eq!(q.text("x").as_deref(), Some("1 2"));
        assert_eq!(q.text("empty"), None);
        assert_eq!(q.bytes("flag"), Some(&b""[..]));
        assert_eq!(q.text("none"), None);
    }
}
