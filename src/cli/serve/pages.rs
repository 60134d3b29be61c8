//! The pages of `lab serve` as HTML: plain tables that work without JavaScript, built
//! from the same data as `lab status --json` and the report renderer's own HTML.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cli::status_cmd::StatusView;
use crate::report::esc;
use crate::store::StepRow;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f3f3f3}nav a{margin-right:1em}";

/// Where JavaScript runs, a page reloads when the store changes (`/events`); without it,
/// it is a page like any other.
const LIVE: &str = "<script>if(window.EventSource){new EventSource('/events')\
.addEventListener('changed',function(){location.reload();});}</script>\n";

/// A page with the lab's navigation.
fn page(title: &str, lab: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{} — {}</title>\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style></head>\n<body>\n\
<nav><a href=\"/\">Lab</a><a href=\"/campaigns\">Campaigns</a><a href=\"/steps\">Operator steps</a></nav>\n<h1>{}</h1>\n{body}{LIVE}</body></html>\n",
        esc(title),
        esc(lab),
        esc(title)
    )
}

/// A table of rows as their JSON objects give them: a column per field, in field order.
fn table<T: Serialize>(rows: &[T], link: impl Fn(&str, &str) -> Option<String>) -> String {
    let values: Vec<serde_json::Value> = rows.iter().filter_map(|r| serde_json::to_value(r).ok()).collect();
    let Some(first) = values.first().and_then(|v| v.as_object()) else { return "<p>none</p>\n".to_string() };
    let keys: Vec<&String> = first.keys().collect();
    let mut out = String::from("<table><tr>");
    for k in &keys {
        let _ = write!(out, "<th>{}</th>", esc(&k.replace('_', " ")));
    }
    out.push_str("</tr>\n");
    for v in &values {
        out.push_str("<tr>");
        for k in &keys {
            let cell = match &v[k.as_str()] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            };
            match link(k, &cell) {
                Some(href) => {
                    let _ = write!(out, "<td><a href=\"{}\">{}</a></td>", esc(&href), esc(&cell));
                }
                None => {
                    let _ = write!(out, "<td>{}</td>", esc(&cell));
                }
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

fn campaign_link(key: &str, value: &str) -> Option<String> {
    (key == "campaign" && !value.is_empty()).then(|| format!("/campaigns/{value}"))
}

/// The lab: devices with their state and current trial, the queues, the steps that wait,
/// the hosts (`lab status`'s data).
pub fn lab(v: &StatusView) -> String {
    let mut body = String::new();
    let _ = write!(body, "<h2>Devices</h2>\n{}", table(&v.devices, campaign_link));
    let _ = write!(body, "<h2>Queue</h2>\n{}", table(&v.queues, |_, _| None));
    if !v.waiting.is_empty() {
        let _ = write!(body, "<h2>Operator steps waiting</h2>\n{}", table(&v.waiting, campaign_link));
    }
    let _ = write!(body, "<h2>Hosts</h2>\n{}", table(&v.hosts, |_, _| None));
    let _ = writeln!(body, "<p>Store: {}</p>", esc(&v.store));
    page(&format!("Lab {}", v.lab), &v.lab, &body)
}

/// Every campaign: status, progress, ETA.
pub fn campaigns(v: &StatusView) -> String {
    let body = table(&v.campaigns, campaign_link);
    page("Campaigns", &v.lab, &body)
}

/// A campaign's report (the renderer's own HTML document) with the lab's navigation and
/// its downloads put in front of its body.
pub fn campaign(id: &str, report_html: &str) -> String {
    let id = esc(id);
    let bar = format!(
        "<nav><a href=\"/\">Lab</a> <a href=\"/campaigns\">Campaigns</a> · downloads: \
<a href=\"/campaigns/{id}/results.csv\">results.csv</a> <a href=\"/campaigns/{id}/report.json\">report.json</a> \
<a href=\"/campaigns/{id}/junit.xml\">junit.xml</a> <a href=\"/campaigns/{id}/manifest.json\">manifest.json</a></nav>\n"
    );
    let page = match report_html.find("<body>") {
        Some(at) => {
            let at = at + "<body>".len();
            format!("{}\n{bar}{}", &report_html[..at], &report_html[at..])
        }
        None => format!("{bar}{report_html}"),
    };
    match page.rfind("</body>") {
        Some(at) => format!("{}{LIVE}{}", &page[..at], &page[at..]),
        None => page + LIVE,
    }
}

/// The steps running campaigns wait on, each with a form that answers it: a field per
/// setting it asks to attest, and who answers. Answering needs the token (the login page
/// sets it as a cookie).
pub fn steps(lab: &str, steps: &[StepRow]) -> String {
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
    page("Operator steps", lab, &body)
}

/// What an answer did: `lab confirm`'s own line.
pub fn answered(said: &str) -> String {
    page("Answered", "", &format!("<p>{}</p><p><a href=\"/steps\">Operator steps</a></p>\n", esc(said.trim())))
}

/// The login form: the token becomes a cookie of this site.
pub fn login(lab: &str, problem: Option<&str>) -> String {
    let said = problem.map(|p| format!("<p><b>{}</b></p>\n", esc(p))).unwrap_or_default();
    let body = format!(
        "{said}<form method=\"post\" action=\"/login\"><label>token <input type=\"password\" name=\"token\" \
required></label> <button type=\"submit\">Log in</button></form>\n"
    );
    page("Log in", lab, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
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
        assert_eq!(table::<Row>(&[], campaign_link), "<p>none</p>\n");
        let page = campaign("c-1", "<html><body><h1>r</h1></body></html>");
        assert!(page.contains("<body>\n<nav>") && page.contains("/campaigns/c-1/report.json"), "{page}");
    }
}
