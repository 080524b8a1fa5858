//! Container names, from the state the runtimes keep on this host: the
//! cgroup path gives a container's id (`model::identity`), never its name.
//!
//! - Docker: `<root>/containers/<id>/config.v2.json`, its `Name` (with
//!   Docker's leading `/` taken off); one small file per container, read
//!   when the id is first seen.
//! - Podman and CRI-O (containers/storage):
//!   `<graphroot>/overlay-containers/containers.json`, a list of
//!   `{id, names}`; read again only when it changed (size or time).
//! - containerd keeps its names in a database of its own: none here.
//!
//! Names are kept once read, so a container removed before its OOM kill
//! is reported still has one. Unreadable or missing files give no name,
//! never an error: the id stays the label.
//!
//! A container can be made, run and removed between two samples (`podman
//! run --rm` of a short job): by the time its cgroup is first looked up,
//! its runtime has deleted its state. So a thread ([`NameWatch`]) watches
//! the runtimes' state with inotify and reads each name the moment it is
//! written; the reads above stay for what was there before it started.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering},
};
use std::time::{Duration, Instant, SystemTime};

/// Where Docker keeps its state unless configured otherwise.
pub const DOCKER_ROOT: &str = "/var/lib/docker";
/// Where containers/storage (Podman as root, CRI-O) keeps its state.
pub const STORAGE_ROOT: &str = "/var/lib/containers/storage";

/// A Docker id whose file was missing is tried again after this long (a
/// container is started before its runtime has written every file).
const RETRY: Duration = Duration::from_secs(10);
/// Names kept at most; past it the cache starts again (a host that made
/// this many containers while vmscope ran reads its files again).
const MAX_NAMES: usize = 65_536;

/// Container names by id, read lazily from the runtimes' state.
#[derive(Debug)]
pub struct ContainerNames {
    docker_root: PathBuf,
    storage_root: PathBuf,
    names: HashMap<String, String>,
    /// Docker ids looked up without a name, with when.
    missed: HashMap<String, Instant>,
    /// containers.json's (length, modification time) when last read.
    storage_seen: Option<(u64, SystemTime)>,
    /// Names the watching thread read as they were written (none when it
    /// could not start).
    watched: Option<NameWatch>,
}

impl Default for ContainerNames {
    fn default() -> Self {
        Self::watching(DOCKER_ROOT, STORAGE_ROOT)
    }
}

impl ContainerNames {
    /// Reading the runtimes' state under other roots (tests; hosts that
    /// moved them).
    pub fn with_roots(docker: impl Into<PathBuf>, storage: impl Into<PathBuf>) -> Self {
        Self {
            docker_root: docker.into(),
            storage_root: storage.into(),
            names: HashMap::new(),
            missed: HashMap::new(),
            watched: None,
            storage_seen: None,
        }
    }

    /// As [`Self::with_roots`], with a thread that reads each name as the
    /// runtime writes it.
    pub fn watching(docker: impl Into<PathBuf>, storage: impl Into<PathBuf>) -> Self {
        let mut me = Self::with_roots(docker, storage);
        me.watched = NameWatch::start(me.docker_root.clone(), me.storage_root.clone());
        me
    }

    /// The name of container `id`, which `runtime` (as the cgroup path
    /// says; `None` when the path does not say) made.
    pub fn name(&mut self, runtime: Option<&str>, id: &str) -> Option<String> {
        if let Some(n) = self.names.get(id) {
            return Some(n.clone());
        }
        if let Some(n) = self.watched.as_ref().and_then(|w| w.name(id)) {
            self.names.insert(id.to_string(), n.clone());
            return Some(n);
        }
        if self.names.len() >= MAX_NAMES {
            self.names.clear();
            self.missed.clear();
        }
        match runtime {
            Some("docker") => self.docker(id),
            Some("podman" | "cri-o") => self.storage(),
            // The cgroupfs driver under a pod does not say which runtime.
            None => {
                self.storage();
                if !self.names.contains_key(id) {
                    self.docker(id);
                }
            }
            _ => {}
        }
        self.names.get(id).cloned()
    }

    fn docker(&mut self, id: &str) {
        if self.missed.get(id).is_some_and(|t| t.elapsed() < RETRY) {
            return;
        }
        match docker_name(&self.docker_root.join("containers").join(id)) {
            Some(n) => {
                self.missed.remove(id);
                self.names.insert(id.to_string(), n);
            }
            None => {
                self.missed.insert(id.to_string(), Instant::now());
            }
        }
    }

    /// Reads containers.json again when it changed since the last read.
    fn storage(&mut self) {
        let path = self
            .storage_root
            .join("overlay-containers")
            .join("containers.json");
        let Ok(meta) = std::fs::metadata(&path) else {
            return;
        };
        let stamp = (
            meta.len(),
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        );
        if self.storage_seen == Some(stamp) {
            return;
        }
        self.storage_seen = Some(stamp);
        self.names
            .extend(storage_names(path.parent().unwrap_or(&path)));
    }
}

/// The name in a Docker container's directory, if its config says one.
fn docker_name(dir: &Path) -> Option<String> {
    std::fs::read(dir.join("config.v2.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<DockerConfig>(&b).ok())
        .map(|c| c.name.trim_start_matches('/').to_string())
        .filter(|n| !n.is_empty())
}

/// The lists containers/storage keeps in `overlay-containers`: its
/// containers, and those it was told need not survive a crash.
const STORAGE_LISTS: [&str; 2] = ["containers.json", "volatile-containers.json"];

/// Every (id, first name) the lists in `dir` give; none when unreadable.
fn storage_names(dir: &Path) -> Vec<(String, String)> {
    STORAGE_LISTS
        .iter()
        .filter_map(|f| std::fs::read(dir.join(f)).ok())
        .filter_map(|b| serde_json::from_slice::<Vec<StorageContainer>>(&b).ok())
        .flatten()
        .filter_map(|c| Some((c.id, c.names.into_iter().find(|n| !n.is_empty())?)))
        .collect()
}

/// The thread that reads names as the runtimes write them: inotify on
/// containers/storage's `overlay-containers` (containers.json is replaced
/// whole at each change) and on Docker's `containers` (a directory per
/// container, its config.v2.json written into it). A directory not there
/// yet is looked for again every second. The thread ends within a second
/// of the watcher being dropped.
#[derive(Debug)]
struct NameWatch {
    names: Arc<Mutex<HashMap<String, String>>>,
    stop: Arc<AtomicBool>,
}

impl NameWatch {
    fn start(docker_root: PathBuf, storage_root: PathBuf) -> Option<NameWatch> {
        use rustix::fs::inotify;
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .map_err(|e| log::debug!("container names: no inotify ({e}); names are read late"))
            .ok()?;
        let names = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (n, st) = (names.clone(), stop.clone());
        let (ready, started) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("vmscope-names".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                // It only reads files its uid owns: it gives up every
                // capability before anything else, and is started only once
                // it has (the privileges line counts the threads that hold
                // any).
                let dropped = crate::source::kernel::privdrop::keep_only(&[]);
                let ok = dropped.is_ok();
                let _ = ready.send(dropped);
                if ok {
                    watch(fd, &docker_root, &storage_root, &n, &st);
                }
            })
            .map_err(|e| log::debug!("container names: no thread ({e}); names are read late"))
            .ok()?;
        match started.recv() {
            Ok(Ok(())) => Some(NameWatch { names, stop }),
            Ok(Err(e)) => {
                log::debug!(
                    "container names: the watching thread could not drop its privileges ({e}); names are read late"
                );
                None
            }
            Err(_) => None,
        }
    }

    fn name(&self, id: &str) -> Option<String> {
        self.names.lock().ok()?.get(id).cloned()
    }
}

impl Drop for NameWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The watching thread's loop (see [`NameWatch`]).
fn watch(
    fd: std::os::fd::OwnedFd,
    docker_root: &Path,
    storage_root: &Path,
    names: &Mutex<HashMap<String, String>>,
    stop: &AtomicBool,
) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
    let storage_dir = storage_root.join("overlay-containers");
    let docker_dir = docker_root.join("containers");
    let written = WatchFlags::CLOSE_WRITE | WatchFlags::MOVED_TO;
    let mut storage_wd: Option<i32> = None;
    let mut docker_wd: Option<i32> = None;
    // Docker containers' directories being watched, by watch.
    let mut docker_ids: HashMap<i32, PathBuf> = HashMap::new();
    let keep = |found: Vec<(String, String)>| {
        if let Ok(mut m) = names.lock() {
            if m.len() + found.len() > MAX_NAMES {
                m.clear();
            }
            m.extend(found);
        }
    };
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if storage_wd.is_none()
            && let Ok(wd) = inotify::add_watch(&fd, &storage_dir, written | WatchFlags::ONLYDIR)
        {
            storage_wd = Some(wd);
            keep(storage_names(&storage_dir));
        }
        if docker_wd.is_none() {
            docker_wd = inotify::add_watch(
                &fd,
                &docker_dir,
                WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR,
            )
            .ok();
        }
        let mut pfd = [PollFd::new(&fd, PollFlags::IN)];
        let second = Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        if poll(&mut pfd, Some(&second)).unwrap_or(0) == 0 {
            continue;
        }
        let mut reader = inotify::Reader::new(&fd, &mut buf);
        while let Ok(ev) = reader.next() {
            let (wd, flags) = (ev.wd(), ev.events());
            let file = ev
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                keep(storage_names(&storage_dir));
            } else if flags.contains(ReadFlags::IGNORED) {
                // The watched directory went away: look for it again.
                if storage_wd == Some(wd) {
                    storage_wd = None;
                } else if docker_wd == Some(wd) {
                    docker_wd = None;
                }
                docker_ids.remove(&wd);
            } else if Some(wd) == storage_wd {
                if STORAGE_LISTS.contains(&file.as_str()) {
                    keep(storage_names(&storage_dir));
                }
            } else if Some(wd) == docker_wd {
                if flags.contains(ReadFlags::ISDIR) && !file.is_empty() {
                    let dir = docker_dir.join(&file);
                    if let Ok(w) = inotify::add_watch(&fd, &dir, written | WatchFlags::ONLYDIR) {
                        docker_ids.insert(w, dir.clone());
                    }
                    // It may have been written before the watch was set.
                    if let Some(n) = docker_name(&dir) {
                        keep(vec![(file, n)]);
                    }
                }
            } else if let Some(dir) = docker_ids.get(&wd)
                && file == "config.v2.json"
                && let Some(n) = docker_name(dir)
            {
                let id = dir
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                keep(vec![(id, n)]);
            }
        }
    }
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(rename = "Name", default)]
    name: String,
}

#[derive(serde::Deserialize)]
struct StorageContainer {
    id: String,
    #[serde(default)]
    names: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "c73584913b701cdb7875faed41649b9bdd0c1297795308f51b771636935f12ce";
    const B: &str = "9a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b";

    fn roots() -> (tempfile::TempDir, ContainerNames) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let names =
            ContainerNames::with_roots(dir.path().join("docker"), dir.path().join("storage"));
        (dir, names)
    }

    fn write(path: PathBuf, text: &str) {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("its directory");
        std::fs::write(path, text).expect("the file");
    }

    #[test]
    fn docker_names_come_from_each_containers_config() {
        let (dir, mut n) = roots();
        write(
            dir.path()
                .join(format!("docker/containers/{A}/config.v2.json")),
            r#"{"ID":"x","Name":"/web-1","State":{"Running":true}}"#,
        );
        assert_eq!(n.name(Some("docker"), A).as_deref(), Some("web-1"));
        // Kept once read: the container's files may go before its OOM kill
        // is reported.
        std::fs::remove_dir_all(dir.path().join("docker")).expect("removed");
        assert_eq!(n.name(Some("docker"), A).as_deref(), Some("web-1"));
        assert_eq!(n.name(Some("docker"), B), None);
    }

    #[test]
    fn storage_names_are_read_again_when_the_list_changes() {
        let (dir, mut n) = roots();
        let list = dir
            .path()
            .join("storage/overlay-containers/containers.json");
        write(
            list.clone(),
            &format!(r#"[{{"id":"{A}","names":["db"],"image":"i"}}]"#),
        );
        assert_eq!(n.name(Some("podman"), A).as_deref(), Some("db"));
        assert_eq!(n.name(Some("cri-o"), B), None);
        write(
            list,
            &format!(
                r#"[{{"id":"{A}","names":["db"]}},{{"id":"{B}","names":["k8s_app_pod_ns_uid_0"]}}]"#
            ),
        );
        assert_eq!(
            n.name(Some("cri-o"), B).as_deref(),
            Some("k8s_app_pod_ns_uid_0")
        );
    }

    /// Waits up to 5 s for `f` to hold.
    fn within_5s(mut f: impl FnMut() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_container_removed_before_its_first_lookup_keeps_its_name() {
        // `podman run --rm` and `docker run --rm` of a short job: the
        // runtime writes the container's state, runs it and deletes the
        // state again, all between two samples.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let storage = dir.path().join("storage/overlay-containers");
        std::fs::create_dir_all(&storage).expect("storage");
        let mut n = ContainerNames::watching(dir.path().join("docker"), dir.path().join("storage"));
        // Docker's directory appears after the watcher started: it is
        // looked for again every second.
        std::fs::create_dir_all(dir.path().join("docker/containers")).expect("docker");
        std::thread::sleep(Duration::from_millis(1500));
        let list = storage.join("containers.json");
        let replace = |text: &str| {
            let tmp = storage.join(".tmp-containers.json");
            std::fs::write(&tmp, text).expect("written");
            std::fs::rename(&tmp, &list).expect("replaced");
        };
        replace(&format!(r#"[{{"id":"{A}","names":["job"]}}]"#));
        let cdir = dir.path().join(format!("docker/containers/{B}"));
        std::fs::create_dir(&cdir).expect("a container's directory");
        write(cdir.join("config.v2.json"), r#"{"Name":"/batch"}"#);
        let watched = n.watched.as_ref().expect("a watching thread");
        assert!(
            within_5s(|| watched.name(A).is_some() && watched.name(B).is_some()),
            "both names read as written"
        );
        replace("[]");
        std::fs::remove_dir_all(&cdir).expect("removed");
        assert_eq!(n.name(Some("podman"), A).as_deref(), Some("job"));
        assert_eq!(n.name(Some("docker"), B).as_deref(), Some("batch"));
    }

    #[test]
    fn unknown_runtimes_and_broken_files_give_no_name() {
        let (dir, mut n) = roots();
        write(
            dir.path()
                .join("storage/overlay-containers/containers.json"),
            "not json",
        );
        write(
            dir.path()
                .join(format!("docker/containers/{A}/config.v2.json")),
            r#"{"Name":""}"#,
        );
        assert_eq!(n.name(Some("podman"), A), None);
        assert_eq!(n.name(Some("docker"), A), None);
        assert_eq!(n.name(Some("containerd"), A), None);
        // Under a pod the runtime is unsaid: both places are tried.
        write(
            dir.path()
                .join(format!("docker/containers/{B}/config.v2.json")),
            r#"{"Name":"/k8s_app"}"#,
        );
        assert_eq!(n.name(None, B).as_deref(), Some("k8s_app"));
    }
}
