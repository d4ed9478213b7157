//! HTML building blocks: escaping, the page layout (skip link, navigation, main landmark, the
//! CSRF token for the script), and the human forms of sizes, times and modes.

use std::fmt::Write;

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Percent-encodes bytes for a query value (everything but unreserved characters and `/`).
pub fn url_bytes(b: &[u8]) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'/');
    percent_encoding::percent_encode(b, SET).to_string()
}

/// Percent-encodes text for a query value.
pub fn url(s: &str) -> String {
    url_bytes(s.as_bytes())
}

/// The sections of the navigation, with their addresses.
const NAV: [(&str, &str); 6] = [
    ("Overview", "/"),
    ("Snapshots", "/snapshots"),
    ("Back up", "/backup"),
    ("Forget & prune", "/forget"),
    ("Check", "/check"),
    ("Jobs", "/jobs"),
];

/// A whole page: `title`, the navigation with `current` marked, and `body` in `<main>`.
pub fn page(title: &str, current: &str, csrf: &str, body: &str) -> String {
    let mut nav = String::new();
    for (name, href) in NAV {
        let cur = if href == current {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(nav, "<li><a href=\"{href}\"{cur}>{}</a></li>", esc(name));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"arca-csrf\" content=\"{csrf}\">\
         <title>{t} · arca</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/static/app.css\">\
         <script src=\"/static/app.js\" defer></script></head><body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header><a class=\"brand\" href=\"/\">arca</a><nav aria-label=\"Sections\"><ul>{nav}</ul></nav></header>\
         <main id=\"main\" tabindex=\"-1\">{body}</main></body></html>",
        t = esc(title),
    )
}

/// A minimal page without navigation (refusals): no stylesheet, as the request that gets it
/// cannot fetch `/static/app.css` either, and the Content-Security-Policy blocks inline styles.
pub fn bare_page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title></head><body><main>{body}</main></body></html>",
        esc(title)
    )
}

/// An error box (role=alert) with a readable message.
pub fn alert(message: &str) -> String {
    format!(
        "<div class=\"alert\" role=\"alert\"><strong>Error:</strong> {}</div>",
        esc(message)
    )
}

pub use arca_format::text::{human_bytes as bytes, human_duration as duration};

/// Local time as `2024-05-01 12:30:00` from seconds and nanoseconds since the epoch.
pub fn time(sec: i64, nsec: u32) -> String {
    arca_format::text::entry_time(
        arca_format::Timespec { sec, nsec },
        arca_format::text::TimeStyle::Short,
    )
}

pub use arca_format::text::mode_string;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_forms() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(url_bytes(b"/a b/\xe9&x"), "/a%20b/%E9%26x");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(12), "12 B");
        assert_eq!(duration(3725.0), "1:02:05");
        assert!(page("T<", "/", "c", "<p>x</p>").contains("<title>T&lt; · arca</title>"));
    }
}
