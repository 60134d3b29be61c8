//! The pages of `lab serve` as HTML: plain tables that work without JavaScript, built
//! from the same data as `lab status --json` and the report renderer's own HTML.

use std::fmt::Write as _;

use tabled::Tabled;

use super::cancel::QueuedCampaign;
use super::submitted::SubmittedCampaign;
use crate::cli::lab_view::StatusView;
use crate::report::esc;
use crate::store::StepRow;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f3f3f3}";

/// Where JavaScript runs, a page listens on `/events` for its own new content (`page`
/// events, sent when the store moved) and swaps it into its `<main id="live">`: it asks the
/// server for nothing. Not while someone is typing into one of its forms (an operator's
/// half-typed answer is not thrown away; the title gets a `*` until a later update finds
/// the form untouched). A page left (or kept in the back/forward cache) closes its stream:
/// a browser keeps at most six connections to one server, and cached pages holding theirs
/// would leave none for the next page; one shown again from that cache is stale and
/// reloads. Without JavaScript, it is a page like any other.
const LIVE: &str = "<script>if(window.EventSource){var es=new EventSource('/events?page='+\
encodeURIComponent(location.pathname));es.addEventListener('page',function(e){var typing=[].some.call(\
document.querySelectorAll('input'),function(i){return i.value!==''||i===document.activeElement;});if(typing){\
if(document.title.charAt(0)!=='*'){document.title='* '+document.title;}}else{var m=document.getElementById('live');\
if(m){m.innerHTML=e.data;}if(document.title.charAt(0)==='*'){document.title=document.title.slice(2);}}});\
addEventListener('pagehide',function(){es.close();});addEventListener('pageshow',function(e){if(e.persisted){\
location.reload();}});}</script>\n";

const NAV: &str = "<nav><a href=\"/\">Lab</a> · <a href=\"/campaigns\">Campaigns</a> · <a href=\"/history\">History</a> · \
<a href=\"/steps\">Operator steps</a> · <a href=\"/submit\">Submit</a></nav>";

/// A page with the lab's navigation, its `main` live.
fn page(title: &str, lab: &str, main: &str) -> String {
    page_live(title, lab, &format!("<main id=\"live\">\n{main}</main>\n"), LIVE)
}

/// A page with the lab's navigation; `live`: its script, or nothing for the answer to a
/// form (reloading a POST's answer would post it again).
fn page_live(title: &str, lab: &str, body: &str, live: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} — {}</title>\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\n<body>\n\
{NAV}\n<h1>{}</h1>\n{body}{live}</body></html>\n",
        esc(title),
        esc(lab),
        esc(title)
    )
}

/// A table of rows with `lab status`'s columns, in its order; `link(column, value)`: where
/// a cell links to.
fn table<T: Tabled>(rows: &[T], link: impl Fn(&str, &str) -> Option<String>) -> String {
    table_cells(rows, |k, v| link(k, v).map(|href| format!("<a href=\"{}\">{}</a>", esc(&href), esc(v))))
}

/// [`table`] with `cell(column, value)`: a cell's own HTML, else its escaped text.
fn table_cells<T: Tabled>(rows: &[T], cell: impl Fn(&str, &str) -> Option<String>) -> String {
    if rows.is_empty() {
        return "<p>none</p>\n".to_string();
    }
    let keys: Vec<String> = T::headers().iter().map(|h| h.to_string()).collect();
    let mut out = String::from("<table><tr>");
    for k in &keys {
        let _ = write!(out, "<th>{}</th>", esc(&k.replace('_', " ")));
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for (k, value) in keys.iter().zip(row.fields()) {
            let html = cell(k, &value).unwrap_or_else(|| esc(&value));
            let _ = write!(out, "<td>{html}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// A campaign cell's link: none for `-` (`lab status`'s "no campaign", as for a device
/// that never ran one), which is no campaign's page.
fn campaign_link(key: &str, value: &str) -> Option<String> {
    (key == "campaign" && !value.is_empty() && value != "-").then(|| format!("/campaigns/{value}"))
}

/// The lab: devices with their state and current trial, the queues, the steps that wait,
/// the hosts (`lab status`'s data).
pub fn lab(v: &StatusView, queued: &[QueuedCampaign], submitted: &[SubmittedCampaign]) -> String {
    page(&format!("Lab {}", v.lab), &v.lab, &lab_main(v, queued, submitted))
}

/// The live part of the lab page.
pub fn lab_main(v: &StatusView, queued: &[QueuedCampaign], submitted: &[SubmittedCampaign]) -> String {
    let mut body = String::new();
    let _ = write!(body, "<h2>Devices</h2>\n{}", table(&v.devices, campaign_link));
    let _ = write!(body, "<h2>Queue</h2>\n{}", table(&v.queues, |_, _| None));
    body.push_str(&queued_section(queued));
    body.push_str(&submitted_section(submitted));
    if !v.waiting.is_empty() {
        let _ = write!(body, "<h2>Operator steps waiting</h2>\n{}", table(&v.waiting, campaign_link));
    }
    if !v.agents.is_empty() {
        let _ = write!(body, "<h2>Agents</h2>\n{}", table(&v.agents, |_, _| None));
    }
    let _ = write!(body, "<h2>Hosts</h2>\n{}", table(&v.hosts, |_, _| None));
    let _ = writeln!(body, "<p>Store: {}</p>", esc(&v.store));
    body
}

/// The campaigns that wait for their devices, each with a Cancel button (a same-origin
/// POST, with the login's cookie); nothing when none waits.
fn queued_section(queued: &[QueuedCampaign]) -> String {
    if queued.is_empty() {
        return String::new();
    }
    let t = table_cells(queued, cancel_button);
    format!(
        "<h2>Queued campaigns</h2>\n{t}<p>Cancelling needs the lab's token (<a href=\"/login\">log in</a>); \
it is the waiting <code>lab run</code>'s Ctrl-C: it leaves every queue and records nothing.</p>\n"
    )
}

/// A campaign cell with a Cancel button (a same-origin POST, with the login's cookie).
fn cancel_button(key: &str, value: &str) -> Option<String> {
    (key == "campaign").then(|| {
        format!(
            "{c} <form method=\"post\" action=\"/campaigns/{c}/cancel\" style=\"display:inline\">\
<button type=\"submit\">Cancel</button></form>",
            c = esc(value)
        )
    })
}

/// The campaigns submitted to the agents and not over, each with a Cancel button;
/// nothing when there are none.
fn submitted_section(submitted: &[SubmittedCampaign]) -> String {
    if submitted.is_empty() {
        return String::new();
    }
    format!(
        "<h2>Submitted campaigns</h2>\n{}<p>Cancelling needs the lab's token (<a href=\"/login\">log in</a>); it is \
<code>lab cancel</code>: a queued campaign is removed, a running one stops at once and stays resumable \
(<code>lab submit --resume</code>).</p>\n",
        table_cells(submitted, cancel_button)
    )
}

/// Every campaign: status, progress, ETA.
pub fn campaigns(v: &StatusView, queued: &[QueuedCampaign], submitted: &[SubmittedCampaign]) -> String {
    page("Campaigns", &v.lab, &campaigns_main(v, queued, submitted))
}

/// The live part of the campaigns page: those queued for their devices (not in the store
/// yet), those submitted to the agents and not over, then the store's.
pub fn campaigns_main(v: &StatusView, queued: &[QueuedCampaign], submitted: &[SubmittedCampaign]) -> String {
    queued_section(queued) + &submitted_section(submitted) + &table(&v.campaigns, campaign_link)
}

/// The Submit form: one of the runbook folder's runbooks and a priority, or why the
/// folder gave none.
pub fn submit(lab: &str, runbooks: &[String], problem: Option<&str>) -> String {
    let mut body = String::new();
    if let Some(p) = problem {
        let _ = writeln!(body, "<p><b>{}</b></p>", esc(p));
    }
    if runbooks.is_empty() {
        body.push_str(
            "<p>No runbook to submit: the lab's runbook folder (<code>[serve] runbooks</code>) has no \
<code>*.toml</code> file.</p>\n",
        );
    } else {
        body.push_str("<form method=\"post\" action=\"/submit\"><label>runbook <select name=\"runbook\" required>");
        for r in runbooks {
            let _ = write!(body, "<option>{}</option>", esc(r));
        }
        body.push_str(
            "</select></label> <label>priority <input name=\"priority\" type=\"number\" step=\"1\" \
placeholder=\"0\"></label> <button type=\"submit\">Submit</button></form>\n",
        );
    }
    body.push_str(
        "<p>Submitting needs the lab's token (<a href=\"/login\">log in</a>). The campaign is validated and planned \
as <code>lab submit</code> does and queued for the lab's agents; higher priority goes first.</p>\n",
    );
    // Not live: an update would not touch a form, and there is nothing here to update.
    page_live("Submit", lab, &body, "")
}

/// What a submit did: the new campaign, linked, and a note on hosts without an agent.
pub fn submitted(lab: &str, s: &crate::runner::Submitted) -> String {
    let mut body = format!(
        "<p>Submitted campaign <a href=\"/campaigns/{id}\">{id}</a> ({}: {} trials, priority {}).</p>\n",
        esc(&s.runbook),
        s.trials,
        s.priority,
        id = esc(&s.id)
    );
    if !s.hosts_without_agent.is_empty() {
        let _ = writeln!(
            body,
            "<p>No agent serves {} now: its trials wait for <code>lab agent --host HOST</code> there.</p>",
            esc(&s.hosts_without_agent.join(", "))
        );
    }
    body.push_str("<p><a href=\"/campaigns\">Campaigns</a> · <a href=\"/submit\">Submit another</a></p>\n");
    page_live("Submitted", lab, &body, "")
}

/// A campaign's report (the renderer's own HTML document) with the lab's navigation and
/// its downloads put in front of its body.
pub fn campaign(id: &str, report_html: &str) -> String {
    let id = esc(id);
    let bar = format!(
        "{NAV}\n<p>Downloads: \
<a href=\"/campaigns/{id}/results.csv\">results.csv</a> <a href=\"/campaigns/{id}/report.json\">report.json</a> \
<a href=\"/campaigns/{id}/junit.xml\">junit.xml</a> <a href=\"/campaigns/{id}/manifest.json\">manifest.json</a></p>\n"
    );
    wrap(report_html, &bar)
}

/// A runbook's history page (the history renderer's own document) with the navigation.
pub fn history(history_html: &str) -> String {
    wrap(history_html, &format!("{NAV}\n"))
}

/// The runbooks with a history.
pub fn histories(lab: &str, runbooks: &[String]) -> String {
    page("History", lab, &histories_main(runbooks))
}

/// The live part of the history list.
pub fn histories_main(runbooks: &[String]) -> String {
    let mut body = String::new();
    if runbooks.is_empty() {
        body.push_str("<p>No campaign has run yet.</p>\n");
    }
    body.push_str("<ul>\n");
    for r in runbooks {
        let _ = writeln!(body, "<li><a href=\"/history/{}\">{}</a></li>", esc(&url_path_segment(r)), esc(r));
    }
    body.push_str("</ul>\n");
    body
}

/// `name` as one URL path segment: unreserved characters kept, the rest percent-encoded.
fn url_path_segment(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A document of a renderer with `bar` put in front of its body, the body as the live
/// part, and the live script at its end.
fn wrap(doc: &str, bar: &str) -> String {
    let (head, body, tail) = match (doc.find("<body>"), doc.rfind("</body>")) {
        (Some(a), Some(b)) if a + "<body>".len() <= b => (&doc[..a + "<body>".len()], body_of(doc), &doc[b..]),
        _ => ("", doc, ""),
    };
    format!("{head}\n{bar}<main id=\"live\">{body}</main>\n{LIVE}{tail}")
}

/// What lies between a document's `<body>` and `</body>`: a renderer's page as the live
/// part of a page.
pub fn body_of(doc: &str) -> &str {
    match (doc.find("<body>"), doc.rfind("</body>")) {
        (Some(a), Some(b)) if a + "<body>".len() <= b => &doc[a + "<body>".len()..b],
        _ => doc,
    }
}

/// The steps running campaigns wait on, each with a form that answers it: a field per
/// setting it asks to attest, and who answers. Answering needs the token (the login page
/// sets it as a cookie).
pub fn steps(lab: &str, steps: &[StepRow]) -> String {
    page("Operator steps", lab, &steps_main(steps))
}

/// The live part of the steps page.
pub fn steps_main(steps: &[StepRow]) -> String {
    let mut body = String::new();
    if steps.is_empty() {
        body.push_str("<p>No step waits for an answer.</p>\n");
    }
    for st in steps {
        let _ = write!(
            body,
            "<section class=\"step\"><h2>{} on {}</h2><p>{}</p><p>campaign <a href=\"/campaigns/{c}\">{c}</a>{}, \
answer before {}</p>\n<form method=\"post\" action=\"/steps/{}\">",
            esc(&st.step),
            esc(&st.device),
            esc(&st.text),
            st.trial_key.as_ref().map(|t| format!(", trial {}", esc(t))).unwrap_or_default(),
            esc(&st.deadline),
            st.id,
            c = esc(&st.campaign),
        );
        for key in &st.attest {
            let _ = write!(body, "<label>{k} <input name=\"{k}\" required></label> ", k = esc(key));
        }
        body.push_str("<label>by <input name=\"by\"></label> <button type=\"submit\">Done</button></form></section>\n");
    }
    body.push_str("<p><a href=\"/login\">Log in with the lab's token</a> to answer.</p>\n");
    body
}

/// What an answer did: `lab confirm`'s own line.
pub fn answered(said: &str) -> String {
    self::said("Answered", "", said, "/steps")
}

/// A change done: what was done, in a line, and a way back.
pub fn said(title: &str, lab: &str, what: &str, back: &str) -> String {
    page_live(title, lab, &format!("<p>{}</p><p><a href=\"{}\">Back</a></p>\n", esc(what.trim()), esc(back)), "")
}

/// The login form: the token becomes a cookie of this site.
pub fn login(lab: &str, problem: Option<&str>) -> String {
    let said = problem.map(|p| format!("<p><b>{}</b></p>\n", esc(p))).unwrap_or_default();
    let body = format!(
        "{said}<form method=\"post\" action=\"/login\"><label>token <input type=\"password\" name=\"token\" \
required></label> <button type=\"submit\">Log in</button></form>\n"
    );
    // Not live: a failed login's page is the answer to a POST.
    page_live("Log in", lab, &body, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Tabled)]
    struct Row {
        campaign: String,
        note: String,
    }

    #[test]
    fn tables_escape_what_they_show_and_link_campaigns() {
        let rows = [Row { campaign: "c-1".into(), note: "<script>alert(1)</script>".into() }];
        let html = table(&rows, campaign_link);
        assert!(html.contains("<a href=\"/campaigns/c-1\">c-1</a>"), "{html}");
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script>"), "{html}");
        assert!(html.starts_with("<table><tr><th>campaign</th><th>note</th></tr>"), "the fields' order: {html}");
        assert_eq!(table::<Row>(&[], campaign_link), "<p>none</p>\n");
        let never = table(&[Row { campaign: "-".into(), note: String::new() }], campaign_link);
        assert!(never.contains("<td>-</td>") && !never.contains("<a "), "no campaign is no link: {never}");
        let page = campaign("c-1", "<html><body><h1>r</h1></body></html>");
        assert!(page.contains("<body>\n<nav>") && page.contains("/campaigns/c-1/report.json"), "{page}");
        assert!(page.contains("<main id=\"live\"><h1>r</h1></main>"), "{page}");
        assert!(page.contains("<script>") && page.ends_with("</script>\n</body></html>"), "{page}");
        assert_eq!(body_of("<html><body><p>x</p></body></html>"), "<p>x</p>");
        let list = histories("lab", &["envoy poll/ü".into()]);
        assert!(list.contains("<a href=\"/history/envoy%20poll%2F%C3%BC\">envoy poll/ü</a>"), "{list}");
    }
}
