//! The HTML report renders in headless Chromium without console messages, and its
//! plots are drawn: a screenshot holds many pixels in each variant's plot color.
//!
//! Needs Debian's `chromium`. Without it the test is ignored (`#[test_needs::needs(chromium)]`),
//! unless LAB_REQUIRE_CHROMIUM=1 (set by .ci/run, which installs chromium), where it fails.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TempLab;

fn chromium() -> PathBuf {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        let out = Command::new("sh").args(["-c", &format!("command -v {name}")]).output().ok()?;
        let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
        (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
    });
    found.expect(
        "needs chromium: it is not installed: the HTML screenshot test cannot run (Debian: apt-get install chromium)",
    )
}

/// Screenshots `page` into `png`; returns Chromium's log (stderr).
fn screenshot(chromium: &Path, page: &Path, png: &Path, size: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={size}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(png.exists(), "no screenshot: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Console messages Chromium logged (`INFO:CONSOLE(...)`): script errors, warnings.
fn console_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// Pixels of an RGB(A) screenshot within `tol` of `rgb`, and the share of non-white ones.
pub(crate) fn pixels(png_path: &Path, colors: &[[u8; 3]], tol: i32) -> (Vec<usize>, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().expect("buffer size")];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG color type {other:?}"),
    };
    let data = &buf[..info.buffer_size()];
    let mut counts = vec![0; colors.len()];
    let mut non_white = 0usize;
    let total = data.len() / step;
    for px in data.chunks_exact(step) {
        if px[0] < 250 || px[1] < 250 || px[2] < 250 {
            non_white += 1;
        }
        for (i, c) in colors.iter().enumerate() {
            if (0..3).all(|k| (i32::from(px[k]) - i32::from(c[k])).abs() <= tol) {
                counts[i] += 1;
            }
        }
    }
    (counts, non_white as f64 / total as f64)
}

#[test_needs::needs(chromium)]
#[test]
fn html_report_renders_with_plots_and_no_console_messages() {
    let chromium = chromium();
    let lab = TempLab::new();
    lab.cmd(&["run", "runbooks/envoy-battery-audit.toml"]).assert().success();
    let id = lab.campaigns()[0].clone();
    let page = lab.artifacts().join(&id).join("report.html");
    let shots = tempfile::tempdir().unwrap();

    // The detector works: a page with a script error is caught.
    let bad = shots.path().join("bad.html");
    std::fs::write(&bad, "<!DOCTYPE html><p>x</p><script>console.error('boom'); missing();</script>").unwrap();
    let log = screenshot(&chromium, &bad, &shots.path().join("bad.png"), "400,300");
    assert!(console_lines(&log).iter().any(|l| l.contains("boom")), "console capture broken:\n{log}");

    // The report: no console message at all (it has no script and loads nothing).
    let png = shots.path().join("report.png");
    let log = screenshot(&chromium, &page, &png, "1200,2600");
    let console = console_lines(&log);
    assert!(console.is_empty(), "console messages: {console:#?}");

    // The first plots (battery_drop_pct, charge_used_mah) are in view: the three variants'
    // colors (control, envoy-poll, envoy-kqueue) fill many pixels (points, boxes, swatches).
    let palette = [[0x4e, 0x79, 0xa7], [0xf2, 0x8e, 0x2b], [0xe1, 0x57, 0x59]];
    let (counts, non_white) = pixels(&png, &palette, 6);
    eprintln!("report screenshot: palette pixels {counts:?}, {:.1} % non-white", non_white * 100.0);
    for (c, n) in palette.iter().zip(&counts) {
        assert!(*n > 300, "plot color {c:02x?} has only {n} pixels: the plots are not drawn");
    }
    assert!(non_white > 0.02, "page looks blank: {:.2} % non-white", non_white * 100.0);

    // The same page without its plots (the legend's swatches keep some of those colors):
    // the plots themselves add hundreds of pixels of each variant's color.
    let plain = shots.path().join("plain.html");
    let text = std::fs::read_to_string(&page).unwrap();
    let without_svg: String = strip_svgs(&text);
    std::fs::write(&plain, without_svg).unwrap();
    let plain_png = shots.path().join("plain.png");
    screenshot(&chromium, &plain, &plain_png, "1200,2600");
    let (plain_counts, _) = pixels(&plain_png, &palette, 6);
    for ((c, with), without) in palette.iter().zip(&counts).zip(&plain_counts) {
        assert!(
            with.saturating_sub(*without) >= 500,
            "plot color {c:02x?}: {with} pixels with plots, {without} without"
        );
    }
}

/// The page with every `<svg>…</svg>` removed.
fn strip_svgs(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("</svg>").map(|e| start + e + "</svg>".len()).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
