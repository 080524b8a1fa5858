//! `vmscope report`: one self-contained HTML page (inline SVG, no script,
//! no network) from a recording, a bench file, the JSON of `vmscope compare`,
//! or BASE and NEW compared as `compare` does; optionally every plot as an
//! SVG and a PNG file too.
//!
//! Nothing is written until every input has been read and every plot drawn
//! (and, with `--png`, rendered). Then every file is written into a staging
//! directory beside its place and, once all are written, renamed into
//! place, the page last; so a failure at any point leaves no page, plot or
//! temporary file behind.

mod bench;
mod cgroups;
mod charts;
mod compare;
mod leadup;
mod oom;
mod png;
mod recording;

use crate::model::recording::Recording;
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use crate::{
    cli::ReportArgs,
    compare::{COMPARE_KIND, Input},
    document::{self},
    exit,
    model::bench::BenchFile,
};

/// One plot: its file-friendly id, caption and SVG text.
pub struct Plot {
    pub id: String,
    pub title: String,
    pub svg: String,
}

/// What a report is made from.
enum Material {
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
fn load(path: &Path) -> anyhow::Result<Material> {
    let text = crate::compare::read_input(path)?;
    parse(path, &text)
}

/// [`load`] on a file's text.
fn parse(path: &Path, text: &str) -> anyhow::Result<Material> {
    if is_compare(text) {
        let doc = compare::from_str(text)
            .map_err(|e| crate::compare::not_a(path, "compare output", &e))?;
        return Ok(Material::Compare(Box::new(doc)));
    }
    Ok(match crate::compare::parse(path, text)? {
        Input::Recording(r) => Material::Recording(r),
        Input::Bench(b) => Material::Bench(b),
    })
}

/// `report BASE NEW`: the comparison `vmscope compare` makes.
fn load_pair(base: &Path, new: &Path, threshold: f64) -> anyhow::Result<Material> {
    if !(threshold.is_finite() && threshold >= 0.0) {
        return Err(exit::failure(
            exit::USAGE,
            format!("--threshold {threshold} is not a percentage; give 0 or more"),
        ));
    }
    // A compare output is one side of nothing: say so rather than call it a
    // broken recording.
    for p in [base, new] {
        if is_compare(&crate::compare::read_input(p)?) {
            return Err(crate::compare::bad_input(format!(
                "{} is a compare output; give it alone, or BASE and NEW as two recordings or \
                 two bench files",
                p.display()
            )));
        }
    }
    let report = crate::compare::compare_files(base, new, threshold)?;
    Ok(Material::Compare(Box::new(compare::from_report(&report)?)))
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

/// A report rendered in memory: the page and every plot, ids made safe
/// file names.
pub struct Rendered {
    pub html: String,
    pub plots: Vec<Plot>,
}

/// The page and plots of one source.
fn render(source: Material) -> anyhow::Result<Rendered> {
    let (title, body, plots) = match source {
        Material::Recording(rec) => {
            let mut plots = recording::plots(&rec, "")?;
            safe_ids(&mut plots);
            (
                recording::title(&rec),
                recording::body(&rec, &plots, 2),
                plots,
            )
        }
        Material::Bench(b) => {
            let mut plots = bench::plots(&b)?;
            safe_ids(
                plots
                    .bench
                    .iter_mut()
                    .chain(plots.runs.iter_mut().flatten()),
            );
            let body = bench::body(&b, &plots);
            let mut all = plots.bench;
            all.extend(plots.runs.into_iter().flatten());
            (bench::title(&b), body, all)
        }
        Material::Compare(d) => {
            let mut plots = compare::plots(&d)?;
            safe_ids(&mut plots);
            (compare::title(&d), compare::body(&d, &plots), plots)
        }
    };
    Ok(Rendered {
        html: page(&title, &body, plots.len()),
        plots,
    })
}

/// `report FILE` on the text of FILE (`path` names it in messages): the
/// same reading and drawing, nothing written.
pub fn render_text(path: &Path, text: &str) -> anyhow::Result<Rendered> {
    render(parse(path, text)?)
}

/// `report BASE NEW` on the texts of two files: the comparison `compare`
/// makes, drawn; nothing written.
pub fn render_pair(
    (base_path, base): (&Path, &str),
    (new_path, new): (&Path, &str),
    threshold: f64,
) -> anyhow::Result<Rendered> {
    let b = crate::compare::parse(base_path, base)?;
    let n = crate::compare::parse(new_path, new)?;
    let report = crate::compare::build_report((base_path, &b), (new_path, &n), &[], threshold)?;
    render(Material::Compare(Box::new(compare::from_report(&report)?)))
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
    let output = document::Output::prepare(&out)?;
    check_dir("--svg", &args.svg)?;
    check_dir("--png", &args.png)?;

    let Rendered { html, plots } = render(source)?;
    // Rendered before anything is written: a missing font fails cleanly.
    let pngs = match &args.png {
        Some(_) => {
            let r = png::Renderer::new()?;
            plots
                .iter()
                .map(|p| r.render(&p.svg))
                .collect::<anyhow::Result<Vec<_>>>()?
        }
        None => Vec::new(),
    };

    // The plot files first, the page last: staged, then renamed into place.
    let mut files: Vec<(PathBuf, &[u8])> = Vec::new();
    if let Some(dir) = &args.svg {
        files.extend(
            plots
                .iter()
                .map(|p| (dir.join(format!("{}.svg", p.id)), p.svg.as_bytes())),
        );
    }
    if let Some(dir) = &args.png {
        files.extend(
            plots
                .iter()
                .zip(&pngs)
                .map(|(p, b)| (dir.join(format!("{}.png", p.id)), b.as_slice())),
        );
    }
    if let document::Output::File(path) = &output {
        files.push((path.clone(), html.as_bytes()));
    }
    write_all(&files)?;
    if let document::Output::Stdout = output {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        match out.write_all(html.as_bytes()).and_then(|()| out.flush()) {
            // A reader that stopped early (`| head`) wanted no more.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(0),
            r => r.context("writing the page to stdout")?,
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

/// The longest plot id kept (a file name holds 255 bytes, with room for a
/// `-N` suffix and the extension).
const MAX_ID: usize = 200;

/// Makes every plot id a safe file name and anchor: only `[A-Za-z0-9._-]`
/// (anything else becomes `_`, so `dist-lazyfree/elapsed_s` is
/// `dist-lazyfree_elapsed_s`), not starting with `.`, at most [`MAX_ID`]
/// bytes, and unique (a repeat gets `-2`, `-3`, ...).
fn safe_ids<'a>(plots: impl IntoIterator<Item = &'a mut Plot>) {
    let mut seen = std::collections::HashSet::new();
    for p in plots {
        let mut id: String =
            p.id.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
        if id.is_empty() || id.starts_with('.') {
            id.insert(0, '_');
        }
        // ASCII only by now, so any byte is a char boundary.
        id.truncate(MAX_ID);
        let mut unique = id.clone();
        let mut n = 2u64;
        while !seen.insert(unique.clone()) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        p.id = unique;
    }
}

/// Whether an id is what [`safe_ids`] makes.
pub fn is_safe_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= MAX_ID + 21
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The staging directory a report writes into, in the directory of the
/// files it stages (so that renaming them out of it is atomic); removed,
/// with whatever is left in it, when dropped.
fn staging_dir(dir: &Path) -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(".vmscope-report-")
        .tempdir_in(dir)
        .map_err(|e| {
            exit::failure(
                exit::FAILURE,
                format!(
                    "cannot write into {}: {e}; nothing was written",
                    dir.display()
                ),
            )
        })
}

/// One file of a report: where it goes, where it was staged, and where the
/// file it replaces is kept until every file is in place.
struct Staged {
    target: PathBuf,
    staged: PathBuf,
    backup: PathBuf,
}

/// Writes every `(path, bytes)` so that either all of them are in place or
/// none is: each is written into a staging directory beside its path, and
/// only when all are written are they renamed into place, in order (so the
/// page, given last, comes last). A rename that fails puts back what the
/// earlier ones replaced. Nothing is left behind on failure.
fn write_all(files: &[(PathBuf, &[u8])]) -> anyhow::Result<()> {
    let fail = |target: &Path, why: String| {
        exit::failure(
            exit::FAILURE,
            format!(
                "cannot write {}: {why}; nothing was written",
                target.display()
            ),
        )
    };
    let mut targets = std::collections::HashSet::new();
    for (target, _) in files {
        if !targets.insert(target) {
            return Err(fail(
                target,
                "the page and a plot file (or two plots) would share this name".into(),
            ));
        }
        if std::fs::symlink_metadata(target).is_ok_and(|m| m.is_dir()) {
            return Err(fail(target, "a directory is in the way; remove it".into()));
        }
    }
    let mut dirs: Vec<(PathBuf, tempfile::TempDir)> = Vec::new();
    let mut staged = Vec::with_capacity(files.len());
    for (i, (target, bytes)) in files.iter().enumerate() {
        let parent = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let stage = match dirs.iter().find(|(d, _)| *d == parent) {
            Some((_, t)) => t.path().to_path_buf(),
            None => {
                let t = staging_dir(&parent)?;
                let p = t.path().to_path_buf();
                dirs.push((parent, t));
                p
            }
        };
        let name = target
            .file_name()
            .ok_or_else(|| fail(target, "no file name".into()))?;
        let s = Staged {
            target: target.clone(),
            staged: stage.join(name),
            backup: stage.join(format!("replaced-{i}")),
        };
        write_file(&s.staged, bytes).map_err(|e| fail(target, format!("{}", e.root_cause())))?;
        staged.push(s);
    }
    // Everything is written: now only renames, each undone on failure.
    let mut done: Vec<(&Staged, bool)> = Vec::with_capacity(staged.len());
    for s in &staged {
        match commit(s) {
            Ok(replaced) => done.push((s, replaced)),
            Err(e) => {
                for (d, replaced) in done.into_iter().rev() {
                    if replaced {
                        let _ = std::fs::rename(&d.backup, &d.target);
                    } else {
                        let _ = std::fs::remove_file(&d.target);
                    }
                }
                return Err(fail(&s.target, e.to_string()));
            }
        }
    }
    drop(dirs);
    Ok(())
}

/// Renames one staged file into place, keeping the file it replaces (if
/// any) as its backup. Returns whether one was replaced.
fn commit(s: &Staged) -> std::io::Result<bool> {
    let replaced = match std::fs::rename(&s.target, &s.backup) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    if let Err(e) = std::fs::rename(&s.staged, &s.target) {
        if replaced {
            let _ = std::fs::rename(&s.backup, &s.target);
        }
        return Err(e);
    }
    Ok(replaced)
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    document::write_atomic(path, |w| {
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
    fn plot_ids_become_safe_unique_file_names() {
        let mut plots: Vec<Plot> = [
            "dist-lazyfree/elapsed_s",
            "dist-lazyfree_elapsed_s",
            "dist-lazyfree/elapsed_s",
            "../../etc/passwd",
            ".hidden",
            "",
            "dist-é µs",
            &"x".repeat(300),
        ]
        .iter()
        .map(|id| Plot {
            id: (*id).to_owned(),
            title: String::new(),
            svg: String::new(),
        })
        .collect();
        safe_ids(&mut plots);
        let ids: Vec<&str> = plots.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids[..7],
            [
                "dist-lazyfree_elapsed_s",
                "dist-lazyfree_elapsed_s-2",
                "dist-lazyfree_elapsed_s-3",
                ".._.._etc_passwd".replacen('.', "_.", 1).as_str(),
                "_.hidden",
                "_",
                "dist-___s",
            ]
        );
        assert_eq!(ids[7].len(), MAX_ID);
        assert!(ids.iter().all(|id| is_safe_id(id)), "{ids:?}");
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
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
