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

use std::collections::HashMap;
use std::path::PathBuf;
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
}

impl Default for ContainerNames {
    fn default() -> Self {
        Self::with_roots(DOCKER_ROOT, STORAGE_ROOT)
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
            storage_seen: None,
        }
    }

    /// The name of container `id`, which `runtime` (as the cgroup path
    /// says; `None` when the path does not say) made.
    pub fn name(&mut self, runtime: Option<&str>, id: &str) -> Option<String> {
        if let Some(n) = self.names.get(id) {
            return Some(n.clone());
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
        let path = self
            .docker_root
            .join("containers")
            .join(id)
            .join("config.v2.json");
        let name = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<DockerConfig>(&b).ok())
            .map(|c| c.name.trim_start_matches('/').to_string())
            .filter(|n| !n.is_empty());
        match name {
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
        let Some(list) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<StorageContainer>>(&b).ok())
        else {
            return;
        };
        for c in list {
            if let Some(n) = c.names.into_iter().find(|n| !n.is_empty()) {
                self.names.insert(c.id, n);
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
