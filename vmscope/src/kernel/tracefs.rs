//! Finding (and if need be mounting) tracefs, and reading event formats.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use super::format::EventFormat;

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Where tracefs is, and whether vmscope had to mount it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Tracefs {
    pub path: PathBuf,
    pub mounted_by_vmscope: bool,
}

static TRACEFS: OnceLock<Result<Tracefs, String>> = OnceLock::new();

/// Locates tracefs, mounting it at /sys/kernel/tracing when no mount exists.
pub fn tracefs() -> Result<&'static Tracefs, String> {
    TRACEFS
        .get_or_init(locate_or_mount)
        .as_ref()
        .map_err(Clone::clone)
}

fn locate_or_mount() -> Result<Tracefs, String> {
    if let Some(path) = CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
    {
        return Ok(Tracefs {
            path: path.to_path_buf(),
            mounted_by_vmscope: false,
        });
    }
    let target = Path::new(CANDIDATES[0]);
    rustix::mount::mount(
        "nodev",
        target,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| {
        format!(
            "tracefs is not mounted and mounting it at {} failed ({e}); \
                 mount it with: mount -t tracefs nodev {}",
            target.display(),
            target.display()
        )
    })?;
    if target.join("events").is_dir() {
        Ok(Tracefs {
            path: target.to_path_buf(),
            mounted_by_vmscope: true,
        })
    } else {
        Err(format!(
            "mounted tracefs at {} but it has no events directory",
            target.display()
        ))
    }
}

/// Reads and parses `events/<category>/<name>/format`. The error names the
/// tracepoint and says whether it is absent or malformed.
pub fn event_format(category: &str, name: &str) -> Result<EventFormat, String> {
    let root = tracefs()?;
    let path = root
        .path
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("tracepoint {category}:{name} not found in this kernel")
        } else {
            format!("cannot read {}: {e}", path.display())
        }
    })?;
    EventFormat::parse(&text).map_err(|e| format!("tracepoint {category}:{name}: {e}"))
}

/// Whether `events/<category>/<name>` exists.
pub fn event_exists(category: &str, name: &str) -> bool {
    tracefs().is_ok_and(|t| t.path.join("events").join(category).join(name).is_dir())
}
