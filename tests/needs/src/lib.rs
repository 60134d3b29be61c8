//! `#[test_needs::needs(sshd, cgroup)]` on a `#[test]`: where build.rs found one of the
//! tools missing and its `LAB_REQUIRE_*` variable is not `1`, the test gets
//! `#[ignore = "needs sshd: /usr/sbin/sshd is missing (apt-get install openssh-server)"]`
//! and `cargo test` lists it as ignored with that reason; otherwise the test is left as it
//! is, so it runs, and one that finds its tool missing then fails (CI sets every
//! `LAB_REQUIRE_*`). libtest cannot ignore a test once it runs, so this is decided when the
//! tests are built; build.rs says when to decide again (PATH, the variables, the folders
//! tools are installed in).
//!
//! The names are build.rs' `NEEDS`; an unknown name is a compile error listing them.

use proc_macro::{Delimiter, Group, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

// `const PROBED: &[(&str, Option<&str>)]`: each need and, where its test is to be
// ignored, the reason.
include!(concat!(env!("OUT_DIR"), "/probed.rs"));

#[proc_macro_attribute]
pub fn needs(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut reasons = Vec::new();
    for token in attr {
        match token {
            TokenTree::Ident(name) => match PROBED.iter().find(|(n, _)| name.to_string() == *n) {
                Some((_, reason)) => reasons.extend(*reason),
                None => {
                    let known: Vec<&str> = PROBED.iter().map(|(n, _)| *n).collect();
                    return error(name.span(), &format!("unknown need `{name}`: one of {}", known.join(", ")));
                }
            },
            TokenTree::Punct(p) if p.as_char() == ',' => {}
            other => return error(other.span(), "expected the names of tools, as in #[needs(sshd, cgroup)]"),
        }
    }
    if reasons.is_empty() {
        return item;
    }
    // #[ignore = "…"]
    let inner = [
        TokenTree::Ident(proc_macro::Ident::new("ignore", Span::call_site())),
        TokenTree::Punct(Punct::new('=', Spacing::Alone)),
        TokenTree::Literal(Literal::string(&reasons.join("; "))),
    ];
    let mut out = TokenStream::from_iter([
        TokenTree::Punct(Punct::new('#', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Bracket, inner.into_iter().collect())),
    ]);
    out.extend(item);
    out
}

/// `compile_error!("…")` at `span`.
fn error(span: Span, message: &str) -> TokenStream {
    let mut text = Literal::string(message);
    text.set_span(span);
    let mut call = TokenStream::from_iter([
        TokenTree::Ident(proc_macro::Ident::new("compile_error", span)),
        TokenTree::Punct(Punct::new('!', Spacing::Alone)),
    ]);
    call.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, TokenTree::Literal(text).into()))]);
    call.extend([TokenTree::Punct(Punct::new(';', Spacing::Alone))]);
    call
}
