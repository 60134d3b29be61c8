//! Who may read and who may change the lab through `lab serve`: reading is free on
//! loopback (or with `[serve] public_read`), else it needs the token; anything that
//! changes state needs the token and a same-origin request (docs/serve.md).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::routes::Shared;

/// What `lab serve` lets through.
#[derive(Debug, Clone)]
pub struct Access {
    /// The token (from `[serve] token_file`); without one nothing can be changed.
    pub token: Option<String>,
    /// Reading needs the token too (bound off loopback without `public_read`).
    pub read_needs_token: bool,
    /// This process's session: what the login cookie holds instead of the token, so the
    /// token never travels in a cookie (which every port of the host would receive).
    pub session: String,
    /// The cookie's name, with the port: two `lab serve`s on one host keep theirs apart.
    pub cookie: String,
    /// The cookie is sent over HTTPS only (served behind a TLS proxy: `public_url`).
    pub secure_cookie: bool,
    /// On loopback, the `Host` values this server answers to (`127.0.0.1:PORT`,
    /// `localhost:PORT`, `[::1]:PORT`, and `public_url`'s host behind a proxy): another name
    /// pointed at 127.0.0.1 (DNS rebinding) is refused. `None` off loopback, where reading
    /// needs the token anyway.
    pub hosts: Option<Vec<String>>,
}

impl Access {
    /// Whether the request carries the token (`Authorization: Bearer TOKEN`) or this
    /// process's session cookie. Compared in constant time.
    fn has_token(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else { return false };
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if bearer.is_some_and(|given| same(given.as_bytes(), token.as_bytes())) {
            return true;
        }
        let prefix = format!("{}=", self.cookie);
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';').map(str::trim))
            .filter_map(|kv| kv.strip_prefix(prefix.as_str()))
            .any(|given| same(given.as_bytes(), self.session.as_bytes()))
    }

    /// Whether `given` (from the login form) is the token.
    pub fn accepts(&self, given: &str) -> bool {
        self.token.as_ref().is_some_and(|t| same(given.as_bytes(), t.as_bytes()))
    }

    /// The `Set-Cookie` value a right login gets.
    pub fn session_cookie(&self) -> String {
        let secure = if self.secure_cookie { "; Secure" } else { "" };
        format!("{}={}; HttpOnly; SameSite=Strict; Path=/{secure}", self.cookie, self.session)
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(hosts) = &self.hosts else { return true };
        headers.get(header::HOST).and_then(|v| v.to_str().ok()).is_some_and(|h| hosts.iter().any(|x| x == h))
    }
}

/// The `Host` values a loopback server on `port` answers to.
pub fn loopback_hosts(port: u16) -> Vec<String> {
    vec![format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]
}

/// Constant-time equality: how long it takes says nothing about where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The same origin: an `Origin` (or else `Referer`) header naming the host the request
/// was sent to. Browsers send `Origin` with every cross-site POST.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
    let origin = headers.get(header::ORIGIN).or_else(|| headers.get(header::REFERER)).and_then(|v| v.to_str().ok());
    origin.is_some_and(|o| {
        let rest = o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")).unwrap_or("");
        rest.split('/').next() == Some(host)
    })
}

/// The middleware in front of every route.
pub async fn guard(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let access = &shared.access;
    let headers = request.headers();
    if !access.host_allowed(headers) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this lab serve answers only to 127.0.0.1, localhost, [::1] and its [serve] public_url (the Host header \
names another)",
        );
    }
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    // The login form is read before there is a session, and brings the token in its body.
    let login = request.uri().path() == "/login";
    if reads {
        if access.read_needs_token && !login && !access.has_token(headers) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "reading this lab needs its token: send `Authorization: Bearer TOKEN`",
            );
        }
        return next.run(request).await;
    }
    if access.token.is_none() {
        return refuse(
            StatusCode::FORBIDDEN,
            "this lab serve has no [serve] token_file, so nothing can be changed through it",
        );
    }
    if !login && !access.has_token(headers) {
        return refuse(StatusCode::UNAUTHORIZED, "changing the lab needs its token");
    }
    if !same_origin(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "a change must come from this server's own pages (Origin does not match)",
        );
    }
    next.run(request).await
}

fn refuse(code: StatusCode, why: &str) -> Response {
    (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{why}\n")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    fn access(token: Option<&str>) -> Access {
        Access {
            token: token.map(str::to_string),
            read_needs_token: true,
            session: "sess10n".into(),
            cookie: "lab_session_8470".into(),
            secure_cookie: false,
            hosts: Some(loopback_hosts(8470)),
        }
    }

    #[test]
    fn the_token_comes_as_a_bearer_or_the_session_cookie_and_must_match_whole() {
        let a = access(Some("s3cret"));
        assert!(a.has_token(&headers(&[("authorization", "Bearer s3cret")])));
        assert!(a.has_token(&headers(&[("cookie", "x=1; lab_session_8470=sess10n")])));
        // A planted cookie of the same name before the real one does not lock anyone out.
        assert!(a.has_token(&headers(&[("cookie", "lab_session_8470=planted; lab_session_8470=sess10n")])));
        assert!(!a.has_token(&headers(&[("cookie", "lab_session_8470=s3cret")])), "the token is no session");
        assert!(!a.has_token(&headers(&[("cookie", "lab_session_8471=sess10n")])), "another port's cookie");
        assert!(!a.has_token(&headers(&[("authorization", "Bearer s3cre")])));
        assert!(!a.has_token(&headers(&[("authorization", "Bearer s3crett")])));
        assert!(!a.has_token(&headers(&[])));
        let none = access(None);
        assert!(!none.has_token(&headers(&[("authorization", "Bearer "), ("cookie", "lab_session_8470=sess10n")])));
        assert!(a.host_allowed(&headers(&[("host", "localhost:8470")])));
        assert!(!a.host_allowed(&headers(&[("host", "evil.example:8470")])));
        assert!(!a.host_allowed(&headers(&[])));
    }

    #[test]
    fn same_origin_needs_the_origin_to_name_the_host() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8470"), ("origin", "http://127.0.0.1:8470")])));
        assert!(same_origin(&headers(&[("host", "lab.example"), ("referer", "https://lab.example/steps")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8470"), ("origin", "http://evil.example")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8470"), ("origin", "http://127.0.0.1:8470.evil")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8470")])));
    }
}
