//! `vmscope report`: one self-contained HTML page (inline SVG, no script,
//! no network) from a recording, a bench file, the JSON of `vmscope compare`,
//! or BASE and NEW compared as `compare` does; optionally every plot as an
//! SVG and a PNG file too.
//!
//! Nothing is written until every input has been read and every plot drawn
//! (and, with `--png`, rendered), and each file is written through a
//! temporary name, so bad input never leaves a half-written page.

mod bench;
mod charts;
mod compare;
mod png;
mod recording;

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use crate::{
    bench::BenchFile,
    cli::ReportArgs,
    compare::{COMPARE_KIND, Input},
    exit,
    record::{self, Recording},
};

/// One plot: its file-friendly id, caption and SVG text.
pub struct Plot {
    pub id: String,
    pub title: String,
    pub svg: String,
}

/// What a report is made from.
enum Source {
    Recording(Box<Recording>),
    Bench(Box<BenchFile>),
    Compare(Box<compare::Doc>),
}

/// Whether `text` is compare's JSON, even a broken one.
fn is_compare(text: &str) -> bool {
    crate::compare::has_kind(text, COMPARE_KIND)
}

/// Reads one file: compare's JSON, or whatever `compare` reads (a
/// recording or a bench file), with `compare`'s one-line errors.
fn load(path: &Path) -> anyhow::Result<Source> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| crate::compare::bad_input(format!("cannot read {shown}: {e}")))?;
    if is_compare(&text) {
        let doc = compare::from_str(&text)
            .map_err(|e| crate::compare::not_a(path, "compare output", &e))?;
        return Ok(Source::Compare(Box::new(doc)));
    }
    Ok(match crate::compare::load(path)? {
        Input::Recording(r) => Source::Recording(r),
        Input::Bench(b) => Source::Bench(b),
    })
}

/// `report BASE NEW`: the comparison `vmscope compare` makes.
fn load_pair(base: &Path, new: &Path, threshold: f64) -> anyhow::Result<Source> {
    if !(threshold.is_finite() && threshold >= 0.0) {
        return Err(exit::failure(
            exit::USAGE,
            format!("--threshold {threshold} is not a percentage; give 0 or more"),
        ));
    }
    // A compare output is one side of nothing: say so rather than call it a
    // broken recording.
    for p in [base, new] {
        if std::fs::read_to_string(p).is_ok_and(|t| is_compare(&t)) {
            return Err(crate::compare::bad_input(format!(
                "{} is a compare output; give it alone, or BASE and NEW as two recordings or \
                 two bench files",
                p.display()
            )));
        }
    }
    let report = crate::compare::compare_files(base, new, threshold)?;
    Ok(Source::Compare(Box::new(compare::from_report(&report)?)))
}

/// The default page of `report BASE NEW`: `BASE-vs-NEW.html` beside BASE.
fn pair_page(base: &Path, new: &Path) -> PathBuf {
    let stem = |p: &Path| {
        p.file_stem()
            .map_or_else(|| "vmscope".into(), |s| s.to_string_lossy().into_owned())
    };
    base.with_file_name(format!("{}-vs-{}.html", stem(base), stem(new)))
}

/// An output directory given with `--svg` or `--png`.
fn check_dir(flag: &str, dir: &Option<PathBuf>) -> anyhow::Result<()> {
    match dir {
        Some(d) if !d.is_dir() => Err(exit::failure(
            exit::FAILURE,
            format!("{flag} {}: not a directory; create it first", d.display()),
        )),
        _ => Ok(()),
    }
}

pub fn run(args: &ReportArgs) -> anyhow::Result<u8> {
    let source = match &args.new {
        Some(new) => load_pair(&args.file, new, args.threshold)?,
        None => load(&args.file)?,
    };
    let out = match (&args.output, &args.new) {
        (Some(p), _) => p.clone(),
        (None, Some(new)) => pair_page(&args.file, new),
        (None, None) => args.file.with_extension("html"),
    };
    let output = record::Output::prepare(&out)?;
    check_dir("--svg", &args.svg)?;
    check_dir("--png", &args.png)?;

    let (title, body, plots) = match &source {
        Source::Recording(rec) => {
            let plots = recording::plots(rec, "")?;
            (
                recording::title(rec),
                recording::body(rec, &plots, 2),
                plots,
            )
        }
        Source::Bench(b) => {
            let plots = bench::plots(b)?;
            let body = bench::body(b, &plots);
            let mut all = plots.bench;
            all.extend(plots.runs.into_iter().flatten());
            (bench::title(b), body, all)
        }
        Source::Compare(d) => {
            let plots = compare::plots(d)?;
            (compare::title(d), compare::body(d, &plots), plots)
        }
    };
    let html = page(&title, &body, plots.len());
    // Rendered before anything is written: a missing font fails cleanly.
    let pngs = match &args.png {
        Some(_) => {
            let r = png::Renderer::new()?;
            plots
                .iter()
                .map(|p| r.render(&p.svg).map(|b| (p.id.as_str(), b)))
                .collect::<anyhow::Result<Vec<_>>>()?
        }
        None => Vec::new(),
    };

    match output {
        record::Output::Stdout => print!("{html}"),
        record::Output::File(path) => write_file(&path, html.as_bytes())?,
    }
    if let Some(dir) = &args.svg {
        for p in &plots {
            write_file(&dir.join(format!("{}.svg", p.id)), p.svg.as_bytes())?;
        }
    }
    if let Some(dir) = &args.png {
        for (id, bytes) in &pngs {
            write_file(&dir.join(format!("{id}.png")), bytes)?;
        }
    }
    eprintln!(
        "vmscope report: {} plots written to {}",
        plots.len(),
        out.display()
    );
    for (what, dir) in [("SVG", &args.svg), ("PNG", &args.png)] {
        if let Some(dir) = dir {
            eprintln!(
                "vmscope report: {} {what} files written to {}",
                plots.len(),
                dir.display()
            );
        }
    }
    Ok(0)
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    record::write_atomic(path, |w| {
        use std::io::Write as _;
        w.write_all(bytes)?;
        Ok(())
    })
}

/// A command line as a shell would need it typed.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A two-column table of names and values.
fn meta_table(rows: &[(&str, String)]) -> String {
    let mut s = String::from("<table><tbody>\n");
    for (k, v) in rows {
        let _ = writeln!(
            s,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            html_escape(k),
            html_escape(v)
        );
    }
    s.push_str("</tbody></table>\n");
    s
}

/// Plots as figures in a wrapping row.
fn figures<'a>(plots: impl IntoIterator<Item = &'a Plot>) -> String {
    let mut s = String::from("<div class=\"plots\">\n");
    for p in plots {
        let _ = writeln!(
            s,
            "<figure class=\"plot\" id=\"{}\">{}{}</figure>",
            html_escape(&p.id),
            p.svg,
            if p.title.is_empty() {
                String::new()
            } else {
                format!("<figcaption>{}</figcaption>", html_escape(&p.title))
            }
        );
    }
    s.push_str("</div>\n");
    s
}

/// The whole page around a layout's body.
fn page(title: &str, body: &str, plots: usize) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:1400px}}\
         table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}\
         th{{background:#eee}} td.l,th.l{{text-align:left}}\
         .plots{{display:flex;flex-wrap:wrap;gap:1em}} figure{{margin:0;display:table}}\
         figcaption{{display:table-caption;caption-side:bottom;font-size:90%}}\
         tr.win td.verdict{{color:#060}} tr.loss td.verdict{{color:#b00}}\
         tr.regression td.verdict{{font-weight:bold}}\
         details.run{{margin:.5em 0;border:1px solid #ccc;padding:.3em .8em}}\
         details.run summary{{cursor:pointer;font-weight:bold}}\
         </style></head><body data-plots=\"{plots}\">\n",
        html_escape(title),
    );
    let _ = writeln!(s, "<h1>{}</h1>", html_escape(title));
    s.push_str(body);
    let _ = writeln!(s, "</body></html>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_quotes() {
        assert_eq!(html_escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
        assert_eq!(
            shell_words(&["sh".into(), "-c".into(), "a && b".into(), "it's".into()]),
            "sh -c 'a && b' 'it'\\''s'"
        );
    }

    #[test]
    fn compare_output_is_told_apart_even_when_broken() {
        assert!(is_compare(
            r#"{"kind": "vmscope-compare", "schema_version": 1}"#
        ));
        assert!(is_compare(
            "{\n  \"kind\": \"vmscope-compare\",\n  \"schema_ver"
        ));
        assert!(!is_compare(r#"{"kind": "vmscope-bench"}"#));
        assert!(!is_compare("not JSON"));
    }

    #[test]
    fn the_pair_page_is_named_after_both_sides() {
        assert_eq!(
            pair_page(Path::new("/d/a.json"), Path::new("/e/b.json")),
            Path::new("/d/a-vs-b.html")
        );
    }

    #[test]
    fn the_page_counts_its_plots_and_escapes_its_title() {
        let p = Plot {
            id: "x".into(),
            title: "a < b".into(),
            svg: "<svg></svg>".into(),
        };
        let html = page("t<", &figures([&p]), 1);
        assert!(html.contains("data-plots=\"1\""), "{html}");
        assert!(html.contains("<title>t&lt;</title>"), "{html}");
        assert!(html.contains("<figcaption>a &lt; b</figcaption>"), "{html}");
    }
}
