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
    for path in CANDIDATES.iter().map(Path::new) {
        match std::fs::metadata(path.join("events")) {
            Ok(m) if m.is_dir() => {
                return Ok(Tracefs {
                    path: path.to_path_buf(),
                    mounted_by_vmscope: false,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(not_readable(path));
            }
            _ => {}
        }
    }
    let target = Path::new(CANDIDATES[0]);
    if !super::caps::Privileges::current().cap_sys_admin {
        return Err(format!(
            "tracefs is not mounted, and mounting it needs CAP_SYS_ADMIN; \
             mount it with: mount -t tracefs nodev {}",
            target.display()
        ));
    }
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

/// Why a tracefs mount at `path` cannot be read by this process: the
/// directory's owner and mode, and who may read it.
fn not_readable(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let uid = rustix::process::geteuid().as_raw();
    let how = std::fs::metadata(path)
        .map(|m| {
            format!(
                " (mode {:04o}, owner {}:{})",
                m.mode() & 0o7777,
                m.uid(),
                m.gid()
            )
        })
        .unwrap_or_default();
    format!(
        "tracefs is mounted at {} but uid {uid} cannot read it{how}; \
         classic tracepoints need it readable: run as root, or mount tracefs \
         with gid= of a group this user is in and mode=0750",
        path.display()
    )
}

/// Whether this kernel has tracepoint `category:name`, when that can be
/// told. tracefs says so when it is readable; otherwise the kernel's BTF,
/// which has a `btf_trace_<name>` type for every tracepoint (but not for
/// the syscall events, which are made at boot from the syscall table).
pub fn event_found(category: &str, name: &str) -> Result<bool, String> {
    match tracefs() {
        Ok(t) => Ok(t.path.join("events").join(category).join(name).is_dir()),
        Err(why) => {
            if category == "syscalls" {
                return Err(why);
            }
            match super::btf::Btf::vmlinux() {
                Ok(btf) => Ok(btf.has_tracepoint(name)),
                Err(e) => Err(format!("{why}; and {e}")),
            }
        }
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

/// The value the event's print format names `symbol` for `field`, if it
/// names one (see [`super::format::print_symbols`]).
pub fn event_symbol(category: &str, name: &str, field: &str, symbol: &str) -> Option<i64> {
    let path = tracefs()
        .ok()?
        .path
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    let text = std::fs::read_to_string(path).ok()?;
    super::format::print_symbols(&text, field)
        .into_iter()
        .find_map(|(v, n)| (n == symbol).then_some(v))
}

/// Whether `category:name` is known to exist (see [`event_found`]).
pub fn event_exists(category: &str, name: &str) -> bool {
    event_found(category, name).unwrap_or(false)
}
