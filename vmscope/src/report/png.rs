//! `report --png`: each plot's SVG rendered to a PNG of the same size, its
//! text drawn with the system's fonts. Without any font the text would
//! silently vanish, so that is an error naming the package to install.

use std::sync::Arc;

use anyhow::Context as _;
use resvg::{
    tiny_skia,
    usvg::{self, fontdb},
};

use crate::exit;

/// The Debian package that gives the plots a font.
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";

/// Families that stand in for the plots' `sans-serif`, best first; any
/// other installed family comes after them.
const SANS_SERIF: &[&str] = &[
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "Arial",
    "FreeSans",
];

pub struct Renderer {
    options: usvg::Options<'static>,
}

/// Points `sans-serif` at an installed family, or fails when there is none.
fn with_sans_serif(mut db: fontdb::Database) -> anyhow::Result<fontdb::Database> {
    let has = |name: &str| {
        db.faces()
            .any(|f| f.families.iter().any(|(family, _)| family == name))
    };
    let family = SANS_SERIF
        .iter()
        .find(|f| has(f))
        .map(|f| (*f).to_owned())
        .or_else(|| {
            db.faces()
                .find_map(|f| f.families.first().map(|(family, _)| family.clone()))
        });
    let Some(family) = family else {
        return Err(exit::failure(
            exit::FAILURE,
            format!(
                "--png: no font found for the plots' text; install one \
                 (on Debian: apt-get install {FONT_PACKAGE})"
            ),
        ));
    };
    db.set_sans_serif_family(family);
    Ok(db)
}

impl Renderer {
    /// Loads the system's fonts.
    pub fn new() -> anyhow::Result<Self> {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        Self::with_fonts(db)
    }

    fn with_fonts(db: fontdb::Database) -> anyhow::Result<Self> {
        let options = usvg::Options {
            fontdb: Arc::new(with_sans_serif(db)?),
            ..usvg::Options::default()
        };
        Ok(Self { options })
    }

    fn draw(&self, svg: &str) -> anyhow::Result<tiny_skia::Pixmap> {
        let tree = usvg::Tree::from_str(svg, &self.options).context("reading a plot's SVG")?;
        let size = tree.size().to_int_size();
        let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
            .with_context(|| format!("a plot of {}x{} pixels", size.width(), size.height()))?;
        resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
        Ok(pixmap)
    }

    /// One SVG as PNG bytes, at the SVG's own size.
    pub fn render(&self, svg: &str) -> anyhow::Result<Vec<u8>> {
        // The plots hold a few degenerate shapes (an empty bar, a zero-length
        // tick) that the renderer warns about and skips; the warnings say
        // nothing to the user, so they are kept quiet unless -v.
        let level = log::max_level();
        if level < log::LevelFilter::Debug {
            log::set_max_level(log::LevelFilter::Error);
        }
        let pixmap = self.draw(svg);
        log::set_max_level(level);
        let pixmap = pixmap?;
        let mut pixels = pixmap.pixels().iter();
        let first = pixels.next().copied();
        anyhow::ensure!(
            pixels.any(|p| Some(*p) != first),
            "a plot rendered as a blank image"
        );
        pixmap.encode_png().context("encoding a PNG")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_font_is_one_line_naming_the_package() {
        let Err(e) = Renderer::with_fonts(fontdb::Database::new()) else {
            panic!("an empty font database was accepted");
        };
        assert_eq!(exit::code_of(&e, 0), exit::FAILURE);
        let msg = exit::message_of(&e);
        assert!(msg.contains(FONT_PACKAGE) && !msg.contains('\n'), "{msg}");
    }

    #[test]
    fn a_plot_renders_at_its_size_with_its_text() {
        let r = match Renderer::new() {
            Ok(r) => r,
            // The end-to-end suite insists on fonts; a bare machine may lack them.
            Err(e) => {
                eprintln!("skipped: {}", exit::message_of(&e));
                return;
            }
        };
        let svg =
            super::super::charts::line_plot("t", "per second", &[(0.0, 1.0), (1.0, 2.0)], &[])
                .expect("plot");
        let png = r.render(&svg).expect("renders");
        let pixmap = tiny_skia::Pixmap::decode_png(&png).expect("decodes");
        assert_eq!(
            (pixmap.width(), pixmap.height()),
            (super::super::charts::W, super::super::charts::H)
        );
        // The same plot without its text has fewer dark pixels: text was drawn.
        let dark = |p: &tiny_skia::Pixmap| {
            p.pixels()
                .iter()
                .filter(|c| c.red() < 128 && c.green() < 128)
                .count()
        };
        let bare = svg.replace("<text ", "<text display=\"none\" ");
        let bare =
            tiny_skia::Pixmap::decode_png(&r.render(&bare).expect("renders")).expect("decodes");
        assert!(dark(&pixmap) > dark(&bare) + 100, "no text drawn");
    }

    #[test]
    fn a_blank_svg_is_refused() {
        let Ok(r) = Renderer::new() else { return };
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="white"/></svg>"#;
        assert!(r.render(svg).is_err());
    }
}
