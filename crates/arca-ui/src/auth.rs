//! The access token on every request (query once, then an HttpOnly SameSite=Strict cookie, or
//! `Authorization: Bearer`), CSRF checks on POSTs, the Host check and the security headers.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::{ApiError, App};

/// The header carrying the CSRF token of cookie-authenticated POSTs.
pub const CSRF_HEADER: &str = "x-arca-csrf";

/// The secrets and the names a request must use.
pub struct Security {
    /// The access token.
    pub token: String,
    /// The CSRF token, embedded in pages.
    pub csrf: String,
    /// The session secret the cookie holds: browsers send the cookie to every port of the
    /// host (cookies ignore ports), so it is not the printed token (docs/UI.md).
    pub session: String,
    /// The cookie's name (one per port: cookies ignore ports; `__Host-` over TLS).
    pub cookie: String,
    /// Served over TLS (cookie marked Secure).
    pub tls: bool,
    /// Listening on loopback: the Host header must then name this machine by a loopback
    /// name or address (see [`loopback_host`]), which defeats DNS rebinding.
    pub check_host: bool,
}

impl Security {
    /// The secrets of a server bound to `addr`.
    pub fn new(token: String, addr: SocketAddr, tls: bool) -> Self {
        Security {
            token,
            csrf: crate::net::random_hex(),
            session: crate::net::random_hex(),
            // `__Host-`: only a secure, host-only cookie with `Path=/` may have that name.
            cookie: format!(
                "{}arca_ui_{}",
                if tls { "__Host-" } else { "" },
                addr.port()
            ),
            tls,
            check_host: addr.ip().is_loopback(),
        }
    }
}

/// Equal without leaking where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The values of the cookies called `name`, as bytes. The header is split as bytes, so
/// another cookie of this host (cookies ignore ports) whose value is not ASCII, such as
/// `prefs=café`, does not hide ours.
fn cookie_values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b';'))
        .filter_map(|kv| {
            let kv = kv.trim_ascii();
            let eq = kv.iter().position(|&b| b == b'=')?;
            Some((&kv[..eq], &kv[eq + 1..]))
        })
        .filter(move |(k, _)| *k == name.as_bytes())
        .map(|(_, v)| v)
}

/// Whether a Host header names this machine by a loopback name or address (`localhost`,
/// `127.0.0.0/8`, `[::1]`), with any port or none. A page of another site that reaches
/// 127.0.0.1 by DNS rebinding carries its own name here, which is what this defeats; the
/// port adds nothing (such a page uses the right one), and SSH tunnels and port forwards
/// change it.
fn loopback_host(host: &[u8]) -> bool {
    let Ok(host) = std::str::from_utf8(host) else {
        return false;
    };
    let port_ok = |p: Option<&str>| {
        p.is_none_or(|p| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
        })
    };
    if let Some(rest) = host.strip_prefix('[') {
        let Some((ip, after)) = rest.split_once(']') else {
            return false;
        };
        let port = match after {
            "" => None,
            a => match a.strip_prefix(':') {
                Some(p) => Some(p),
                None => return false,
            },
        };
        return port_ok(port)
            && ip
                .parse::<Ipv6Addr>()
                .is_ok_and(|a| a.to_canonical().is_loopback());
    }
    let (name, port) = match host.split_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    port_ok(port)
        && (name.eq_ignore_ascii_case("localhost")
            || name.parse::<Ipv4Addr>().is_ok_and(|a| a.is_loopback()))
}

/// The request's Host headers, when they are all loopback ones; else the message of the
/// refusal, naming the value.
fn check_host(headers: &HeaderMap) -> Result<(), String> {
    let mut hosts = headers.get_all(header::HOST).iter().peekable();
    if hosts.peek().is_none() {
        return Err("the request has no Host header: open the address that arca ui printed".into());
    }
    for h in hosts {
        if !loopback_host(h.as_bytes()) {
            let shown: String = String::from_utf8_lossy(h.as_bytes())
                .chars()
                .take(100)
                .collect();
            return Err(format!(
                "unexpected Host header {shown:?}: this server answers only to loopback names \
                 and addresses (localhost, 127.0.0.1, [::1]; any port), so that pages of other \
                 sites cannot reach it through their own names (DNS rebinding)"
            ));
        }
    }
    Ok(())
}

/// Where a page opened with `?token=` is sent on: `path` with the `rest` of the query, on
/// this server whatever the path holds. Browsers read `\` as `/` in http(s) addresses and
/// drop tabs and line breaks, so `//evil.example/x` and `/\evil.example/x` would name another
/// site: the leading run of slashes and backslashes becomes one slash, and a backslash,
/// space or control character elsewhere is percent-encoded (the same byte to the router).
fn same_site_location(path: &str, rest: &str) -> String {
    let encode = |to: &mut String, c: char| {
        let mut b = [0u8; 4];
        for byte in c.encode_utf8(&mut b).bytes() {
            to.push_str(&format!("%{byte:02X}"));
        }
    };
    let mut to = String::from("/");
    for c in path.trim_start_matches(['/', '\\']).chars() {
        match c {
            '\\' | ' ' => encode(&mut to, c),
            c if c.is_control() => encode(&mut to, c),
            c => to.push(c),
        }
    }
    if !rest.is_empty() {
        to.push('?');
        for c in rest.chars() {
            match c {
                ' ' => encode(&mut to, c),
                c if c.is_control() => encode(&mut to, c),
                c => to.push(c),
            }
        }
    }
    to
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

/// The advice of a refused page about the token.
const TOKEN_HINT: &str = "Open the address that <code>arca ui</code> printed when it started: \
                          it carries the access token.";

/// The advice of a page refused for its Host header.
const HOST_HINT: &str = "Open this server by a loopback address, such as the one \
                         <code>arca ui</code> printed when it started (<code>127.0.0.1</code>, \
                         <code>localhost</code> or <code>[::1]</code>, with any port), not by \
                         another name.";

/// A refusal: the API's JSON error (`{"error", "needs_password"}`) under `/api/`, else a short
/// page with `hint` (HTML) below the message.
fn refuse(status: StatusCode, api: bool, message: &str, hint: &str) -> Response {
    if api {
        return ApiError::with(status, message).into_response();
    }
    let page = crate::html::bare_page(
        "arca: access refused",
        &format!(
            "<h1>Access refused</h1><p role=\"alert\">{}</p><p>{hint}</p>",
            crate::html::esc(message)
        ),
    );
    (status, axum::response::Html(page)).into_response()
}

/// The middleware in front of every route.
pub async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let sec = &app.sec;
    let api = req.uri().path().starts_with("/api/");
    if sec.check_host
        && let Err(why) = check_host(req.headers())
    {
        return with_headers(refuse(StatusCode::FORBIDDEN, api, &why, HOST_HINT), sec);
    }
    let (query_token, rest) = split_token(req.uri().query().unwrap_or(""));
    let token = sec.token.as_bytes();
    let by_bearer = bearer(req.headers()).is_some_and(|t| same(t.as_bytes(), token));
    let by_cookie =
        cookie_values(req.headers(), &sec.cookie).any(|t| same(t, sec.session.as_bytes()));
    let by_query = query_token
        .as_deref()
        .is_some_and(|t| same(t.as_bytes(), token));
    if !(by_bearer || by_cookie || by_query) {
        let why = if query_token.is_some()
            || bearer(req.headers()).is_some()
            || cookie_values(req.headers(), &sec.cookie).next().is_some()
        {
            "wrong access token"
        } else {
            "this page needs the access token"
        };
        return with_headers(refuse(StatusCode::UNAUTHORIZED, api, why, TOKEN_HINT), sec);
    }
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict{}",
        sec.cookie,
        sec.session,
        if sec.tls { "; Secure" } else { "" }
    );
    // A page opened with ?token=: set the cookie and drop the token from the address bar.
    if by_query && !api && req.method() == Method::GET {
        let to = same_site_location(req.uri().path(), &rest);
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
                    TOKEN_HINT,
                ),
                sec,
            );
        }
        if !by_bearer && let Err(why) = check_csrf(req.headers(), sec) {
            return with_headers(refuse(StatusCode::FORBIDDEN, api, why, TOKEN_HINT), sec);
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
    if !token.is_some_and(|t| same(t.as_bytes(), sec.csrf.as_bytes())) {
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

    /// Browsers send the cookie to every port of the host: it holds a session secret, not the
    /// printed token, and over TLS it is a `__Host-` cookie.
    #[test]
    fn the_cookie_holds_a_session_secret_not_the_token() {
        let addr: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
        let plain = Security::new("t".repeat(64), addr, false);
        assert_eq!(plain.cookie, "arca_ui_4000");
        assert_eq!(plain.session.len(), 64);
        assert_ne!(plain.session, plain.token);
        let tls = Security::new("t".repeat(64), addr, true);
        assert_eq!(tls.cookie, "__Host-arca_ui_4000");
        assert_ne!(tls.session, plain.session);
    }

    #[test]
    fn tokens_and_cookies() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
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
        let one = |h: &HeaderMap, name: &str| cookie_values(h, name).next().map(<[u8]>::to_vec);
        assert_eq!(one(&h, "arca_ui_80"), Some(b"tok".to_vec()));
        assert_eq!(one(&h, "arca_ui_81"), None);
        // Another cookie's bytes that are not ASCII hide nothing.
        h.insert(
            header::COOKIE,
            HeaderValue::from_bytes(b"prefs=caf\xc3\xa9; arca_ui_80=tok")
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(one(&h, "arca_ui_80"), Some(b"tok".to_vec()));
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

    #[test]
    fn loopback_hosts_with_any_port() {
        for ok in [
            "127.0.0.1:8000",
            "127.0.0.1:9000",
            "127.0.0.2:1",
            "localhost:65535",
            "LOCALHOST:80",
            "localhost",
            "127.0.0.1",
            "[::1]:9000",
            "[::1]",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(loopback_host(ok.as_bytes()), "{ok}");
        }
        for refused in [
            "",
            "evil.example:8000",
            "evil.example",
            "localhost.:8000",
            "localhost.evil.example:8000",
            "127.0.0.1.evil.example:8000",
            "10.0.0.1:8000",
            "localhost:",
            "localhost:99999",
            "localhost:80:80",
            "localhost:+80",
            "[::1]x",
            "[::2]:80",
            "[::1:80",
            "caf\u{e9}:80",
        ] {
            assert!(!loopback_host(refused.as_bytes()), "{refused}");
        }
        assert!(!loopback_host(b"localhost\xff:80"));
    }

    #[test]
    fn redirects_stay_on_this_server() {
        assert_eq!(
            same_site_location("/snapshots", "sort=host"),
            "/snapshots?sort=host"
        );
        assert_eq!(same_site_location("/", ""), "/");
        assert_eq!(
            same_site_location("//evil.example/x", ""),
            "/evil.example/x"
        );
        assert_eq!(
            same_site_location("/\\evil.example/x", ""),
            "/evil.example/x"
        );
        assert_eq!(
            same_site_location("\\/\\/evil.example", "a=1"),
            "/evil.example?a=1"
        );
        assert_eq!(same_site_location("/a\\b/c\td", ""), "/a%5Cb/c%09d");
    }
}
