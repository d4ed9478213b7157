//! The access token on every request (query once, then an HttpOnly SameSite=Strict cookie, or
//! `Authorization: Bearer`), CSRF checks on POSTs, the Host check and the security headers.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::App;

/// The header carrying the CSRF token of cookie-authenticated POSTs.
pub const CSRF_HEADER: &str = "x-arca-csrf";

/// The secrets and the names a request must use.
pub struct Security {
    /// The access token.
    pub token: String,
    /// The CSRF token, embedded in pages.
    pub csrf: String,
    /// The cookie's name (one per port: cookies ignore ports).
    pub cookie: String,
    /// Served over TLS (cookie marked Secure).
    pub tls: bool,
    /// The Host values accepted (loopback only: defeats DNS rebinding); `None` beyond loopback.
    pub hosts: Option<Vec<String>>,
}

impl Security {
    /// The secrets of a server bound to `addr`.
    pub fn new(token: String, addr: SocketAddr, tls: bool) -> Self {
        let port = addr.port();
        let hosts = addr.ip().is_loopback().then(|| {
            let mut h = vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ];
            if let SocketAddr::V4(a) = addr {
                h.push(a.to_string());
            }
            h
        });
        Security {
            token,
            csrf: crate::net::random_hex(),
            cookie: format!("arca_ui_{port}"),
            tls,
            hosts,
        }
    }
}

/// Equal without leaking where the first difference is.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    // The scheme's name is case-insensitive (RFC 7235).
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The query without its `token` pair, and the token if there was one.
fn split_token(query: &str) -> (Option<String>, String) {
    let mut token = None;
    let mut rest = vec![];
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix("token=") {
            Some(t) => token = Some(t.to_string()),
            None => rest.push(pair),
        }
    }
    (token, rest.join("&"))
}

/// A refusal: JSON under `/api/`, else a short page.
pub fn refuse(status: StatusCode, api: bool, message: &str) -> Response {
    if api {
        return (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
    }
    let page = crate::html::bare_page(
        "arca: access refused",
        &format!(
            "<h1>Access refused</h1><p role=\"alert\">{}</p><p>Open the address that <code>arca \
             ui</code> printed when it started: it carries the access token.</p>",
            crate::html::esc(message)
        ),
    );
    (status, axum::response::Html(page)).into_response()
}

/// The middleware in front of every route.
pub async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let sec = &app.sec;
    let api = req.uri().path().starts_with("/api/");
    if let Some(hosts) = &sec.hosts {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return refuse(StatusCode::FORBIDDEN, api, "unexpected Host header");
        }
    }
    let (query_token, rest) = split_token(req.uri().query().unwrap_or(""));
    let by_bearer = bearer(req.headers()).is_some_and(|t| same(t, &sec.token));
    let by_cookie = cookie_value(req.headers(), &sec.cookie).is_some_and(|t| same(t, &sec.token));
    let by_query = query_token.as_deref().is_some_and(|t| same(t, &sec.token));
    if !(by_bearer || by_cookie || by_query) {
        let why = if query_token.is_some()
            || bearer(req.headers()).is_some()
            || cookie_value(req.headers(), &sec.cookie).is_some()
        {
            "wrong access token"
        } else {
            "this page needs the access token"
        };
        return with_headers(refuse(StatusCode::UNAUTHORIZED, api, why), sec);
    }
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict{}",
        sec.cookie,
        sec.token,
        if sec.tls { "; Secure" } else { "" }
    );
    // A page opened with ?token=: set the cookie and drop the token from the address bar.
    if by_query && !api && req.method() == Method::GET {
        // One leading slash: `//host/x` would send the browser to another site.
        let path = format!("/{}", req.uri().path().trim_start_matches('/'));
        let to = if rest.is_empty() {
            path
        } else {
            format!("{path}?{rest}")
        };
        let mut r = StatusCode::SEE_OTHER.into_response();
        if let Ok(v) = HeaderValue::from_str(&to) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        return with_headers(r, sec);
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        if req.method() != Method::POST {
            return with_headers(
                refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    api,
                    "only GET and POST are used",
                ),
                sec,
            );
        }
        if !by_bearer && let Err(why) = check_csrf(req.headers(), sec) {
            return with_headers(refuse(StatusCode::FORBIDDEN, api, why), sec);
        }
    }
    let mut resp = next.run(req).await;
    if by_query && let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    with_headers(resp, sec)
}

/// A cookie-authenticated POST: the CSRF header must match, and `Origin`, when sent, must be
/// this server.
fn check_csrf(headers: &HeaderMap, sec: &Security) -> Result<(), &'static str> {
    let token = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    if !token.is_some_and(|t| same(t, &sec.csrf)) {
        return Err("cross-site request refused: missing or wrong X-Arca-CSRF header");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let scheme = if sec.tls { "https" } else { "http" };
        if origin.to_str().ok() != Some(&format!("{scheme}://{host}")) {
            return Err("cross-site request refused: Origin is not this server");
        }
    }
    Ok(())
}

/// Headers on every response: no caching, no framing, no sniffing, scripts and styles from
/// this server only.
fn with_headers(mut r: Response, _sec: &Security) -> Response {
    let h = r.headers_mut();
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(
        h,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    );
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    set(h, header::REFERRER_POLICY, "no-referrer");
    if !h.contains_key(header::CACHE_CONTROL) {
        set(h, header::CACHE_CONTROL, "no-store");
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_cookies() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert_eq!(
            split_token("a=1&token=xyz&b=2"),
            (Some("xyz".into()), "a=1&b=2".into())
        );
        assert_eq!(split_token("a=1"), (None, "a=1".into()));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("x=1; arca_ui_80=tok; y=2"),
        );
        assert_eq!(cookie_value(&h, "arca_ui_80"), Some("tok"));
        assert_eq!(cookie_value(&h, "arca_ui_81"), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer t0k"),
        );
        assert_eq!(bearer(&h), Some("t0k"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer t0k"),
        );
        assert_eq!(bearer(&h), Some("t0k"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic t0k"));
        assert_eq!(bearer(&h), None);
    }
}
