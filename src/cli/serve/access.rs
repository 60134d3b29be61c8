//! Who may read and who may change the lab through `lab serve`: reading is free on
//! loopback (or with `[serve] public_read`), else it needs the token; anything that
//! changes state needs the token and a same-origin request (docs/serve.md).

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::login_limit::{FAILS, Lockout, WINDOW};
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
    /// Behind a reverse proxy (`public_url`): a request from loopback names its client in
    /// the last `X-Forwarded-For` entry, which the proxy appends.
    pub behind_proxy: bool,
}

/// What a request's credentials are, compared.
#[derive(Debug, PartialEq)]
enum Given {
    /// No bearer token and no session cookie of this server (or no token to compare with).
    Nothing,
    Right,
    /// A wrong bearer token: a guess at the token, counted per address.
    WrongToken,
    /// Only a cookie of this server's name with another session (a browser's cookie from
    /// before a restart): refused, not counted; a session is 128 random bits.
    WrongSession,
}

impl Access {
    /// Whether the request carries the token (`Authorization: Bearer TOKEN`) or this
    /// process's session cookie. Compared in constant time.
    fn given(&self, headers: &HeaderMap) -> Given {
        let Some(token) = &self.token else { return Given::Nothing };
        let bearer = self.bearer(headers);
        if bearer.is_some_and(|given| same(given.as_bytes(), token.as_bytes())) {
            return Given::Right;
        }
        let mut sessions = self.sessions(headers).peekable();
        let had_session = sessions.peek().is_some();
        if sessions.any(|given| same(given.as_bytes(), self.session.as_bytes())) {
            return Given::Right;
        }
        match (bearer, had_session) {
            (Some(_), _) => Given::WrongToken,
            (None, true) => Given::WrongSession,
            (None, false) => Given::Nothing,
        }
    }

    fn bearer<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
    }

    /// The values of this server's session cookies in the request.
    fn sessions<'h>(&'h self, headers: &'h HeaderMap) -> impl Iterator<Item = &'h str> + 'h {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';').map(str::trim))
            .filter_map(|kv| kv.strip_prefix(self.cookie.as_str())?.strip_prefix('='))
    }

    /// Whether the request brings credentials to compare (a bearer token or a session).
    fn brings_credentials(&self, headers: &HeaderMap) -> bool {
        self.token.is_some() && (self.bearer(headers).is_some() || self.sessions(headers).next().is_some())
    }

    /// The client a request comes from: the peer, or behind a proxy (a loopback peer,
    /// `public_url` set) the last `X-Forwarded-For` entry, the one the proxy wrote.
    pub fn client(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> IpAddr {
        let ip = peer.map_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |p| p.ip());
        if !(self.behind_proxy && ip.is_loopback()) {
            return ip;
        }
        let forwarded = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).next_back();
        forwarded.and_then(|v| v.rsplit(',').next()).and_then(|v| v.trim().parse().ok()).unwrap_or(ip)
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

/// The peer's address, as the connection loop put it in the request.
pub fn peer(request: &Request) -> Option<SocketAddr> {
    request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}

/// Whether the request carries the right token or session, limiting wrong tokens per
/// client address: `Err` when the address is locked out (the token not compared).
fn has_token(shared: &Shared, client: IpAddr, headers: &HeaderMap) -> Result<bool, Lockout> {
    let access = &shared.access;
    if !access.brings_credentials(headers) {
        return Ok(false);
    }
    shared.logins.before_compare(client, Instant::now())?;
    Ok(match access.given(headers) {
        Given::Right => true,
        Given::WrongToken => {
            wrong_token(shared, client);
            false
        }
        Given::Nothing | Given::WrongSession => false,
    })
}

/// A wrong token from `client`: counted, and said when it locks the address.
pub fn wrong_token(shared: &Shared, client: IpAddr) {
    if let Some(l) = shared.logins.failed(client, Instant::now()) {
        eprintln!(
            "lab serve: {client}: {FAILS} wrong tokens within {} s; its tokens are refused for {} s",
            WINDOW.as_secs(),
            l.retry_after.as_secs()
        );
    }
}

/// The answer to a locked-out address (429 with `Retry-After`), and its log line.
pub fn locked_out(client: IpAddr, l: Lockout) -> Response {
    let wait = l.retry_after.as_secs_f64().ceil() as u64;
    eprintln!(
        "lab serve: {client}: a token refused without comparing it ({} refused while locked out; the wait is now {wait} s)",
        l.refused
    );
    let why = format!(
        "too many wrong tokens from {client}: tokens from it are refused for {wait} s more (each attempt meanwhile \
makes the wait longer)\n"
    );
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8".to_string()), (header::RETRY_AFTER, wait.to_string())],
        why,
    )
        .into_response()
}

/// The middleware in front of every route.
pub async fn guard(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let access = &shared.access;
    let headers = request.headers();
    let client = access.client(peer(&request), headers);
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
        if access.read_needs_token && !login {
            match has_token(&shared, client, headers) {
                Ok(true) => {}
                Ok(false) => {
                    return refuse(
                        StatusCode::UNAUTHORIZED,
                        "reading this lab needs its token: send `Authorization: Bearer TOKEN`",
                    );
                }
                Err(l) => return locked_out(client, l),
            }
        }
        return next.run(request).await;
    }
    if access.token.is_none() {
        return refuse(
            StatusCode::FORBIDDEN,
            "this lab serve has no [serve] token_file, so nothing can be changed through it",
        );
    }
    if !login {
        match has_token(&shared, client, headers) {
            Ok(true) => {}
            Ok(false) => return refuse(StatusCode::UNAUTHORIZED, "changing the lab needs its token"),
            Err(l) => return locked_out(client, l),
        }
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
            behind_proxy: false,
        }
    }

    #[test]
    fn the_token_comes_as_a_bearer_or_the_session_cookie_and_must_match_whole() {
        let a = access(Some("s3cret"));
        let given = |pairs: &[(&'static str, &str)]| a.given(&headers(pairs));
        assert_eq!(given(&[("authorization", "Bearer s3cret")]), Given::Right);
        assert_eq!(given(&[("cookie", "x=1; lab_session_8470=sess10n")]), Given::Right);
        // A planted cookie of the same name before the real one does not lock anyone out.
        assert_eq!(given(&[("cookie", "lab_session_8470=planted; lab_session_8470=sess10n")]), Given::Right);
        assert_eq!(given(&[("cookie", "lab_session_8470=s3cret")]), Given::WrongSession, "the token is no session");
        assert_eq!(given(&[("cookie", "lab_session_8471=sess10n")]), Given::Nothing, "another port's cookie");
        assert_eq!(given(&[("cookie", "lab_session_84700=sess10n")]), Given::Nothing, "another name");
        assert_eq!(given(&[("authorization", "Bearer s3cre")]), Given::WrongToken);
        assert_eq!(given(&[("authorization", "Bearer s3crett"), ("cookie", "lab_session_8470=x")]), Given::WrongToken);
        assert_eq!(given(&[]), Given::Nothing);
        let none = access(None);
        let both = headers(&[("authorization", "Bearer "), ("cookie", "lab_session_8470=sess10n")]);
        assert_eq!(none.given(&both), Given::Nothing);
        assert!(!none.brings_credentials(&both) && a.brings_credentials(&both));
        // Behind a proxy, the client is the proxy's last X-Forwarded-For entry; else the peer.
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let fwd = headers(&[("x-forwarded-for", "10.9.9.9, 203.0.113.5")]);
        assert_eq!(a.client(Some(peer), &fwd), peer.ip(), "not behind a proxy: the header is anyone's");
        let proxied = Access { behind_proxy: true, ..access(Some("s3cret")) };
        assert_eq!(proxied.client(Some(peer), &fwd).to_string(), "203.0.113.5");
        let far: SocketAddr = "198.51.100.2:5000".parse().unwrap();
        assert_eq!(proxied.client(Some(far), &fwd), far.ip(), "only the proxy on loopback is trusted");
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
