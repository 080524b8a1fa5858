//! Which workload a cgroup is, read from its path alone (no API server):
//! the systemd unit, the container runtime and container id, and for
//! Kubernetes the pod's UID and QoS class. Pure: the layouts are the ones
//! systemd, Docker, Podman, containerd, CRI-O and the kubelet make, under
//! both of their cgroup drivers (systemd's `.slice`/`.scope` names and the
//! plain directories of the `cgroupfs` driver), on cgroup v1 and v2 alike.
//! A path none of them made gives nothing, and the path stays the name.
//! The container's *name* is not in the path: the collector adds it from
//! the runtime's own state on the host (`source::containers`).

use serde::{Deserialize, Serialize};

/// What a cgroup's path says about the workload in it. Every field is
/// absent where the path does not say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Identity {
    /// The innermost systemd unit (`nginx.service`, `session-3.scope`),
    /// not counting a container's own scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// `docker`, `podman`, `containerd` or `cri-o`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The container's id (64 hex digits, as the runtime names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The Kubernetes pod's UID, with its dashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// The pod's QoS class: `guaranteed`, `burstable` or `besteffort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// The container's name, as its runtime keeps it on the host (Docker's
    /// and Podman's or CRI-O's state files); absent where the runtime keeps
    /// none there (containerd) or its files could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Container scopes by the runtime that makes them: `<prefix><id>.scope`
/// (systemd driver) or `<prefix><id>` (cgroupfs driver, Podman's).
const SCOPES: &[(&str, &str)] = &[
    ("docker-", "docker"),
    ("libpod-", "podman"),
    ("cri-containerd-", "containerd"),
    ("crio-", "cri-o"),
];

impl Identity {
    /// The workload `path` (below the hierarchy's mount, `/` for the root)
    /// belongs to; `None` when the path follows none of the known layouts.
    pub fn from_path(path: &str) -> Option<Identity> {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let mut w = Identity::default();
        let mut kube = false;
        for (i, &part) in parts.iter().enumerate() {
            let parent = i.checked_sub(1).map(|j| parts[j]);
            if part == "kubepods.slice" || part == "kubepods" {
                kube = true;
                continue;
            }
            if kube && w.kube_part(part, parent) {
                continue;
            }
            if let Some((runtime, id)) = container_scope(part) {
                w.runtime = Some(runtime.into());
                w.container = Some(id.into());
                continue;
            }
            // The cgroupfs drivers: `/docker/<id>`, and under a pod, the
            // container's id alone (its runtime unsaid).
            if is_container_id(part) && (parent == Some("docker") || w.pod_uid.is_some()) {
                if parent == Some("docker") {
                    w.runtime = Some("docker".into());
                }
                w.container = Some(part.into());
                continue;
            }
            if w.container.is_none()
                && (part.ends_with(".service") || part.ends_with(".scope"))
                && !part.contains("-conmon-")
            {
                w.unit = Some(part.into());
            }
        }
        (w != Identity::default()).then_some(w)
    }

    /// The same, with the container's name where one is known.
    pub fn named(mut self, name: Option<&str>) -> Identity {
        if self.container.is_some() {
            self.name = name.map(str::to_string);
        }
        self
    }

    /// A short label without spaces, for a table cell: `podman:web`,
    /// `docker:9a3b5c7d9e1f` (the id's first 12 digits, as the runtimes
    /// print it), `pod:1f0e2d3c/containerd:web` for a pod's container; a
    /// unit alone is its name.
    pub fn label(&self) -> String {
        let pod = self
            .pod_uid
            .as_ref()
            .map(|uid| format!("pod:{}", uid.get(..8).unwrap_or(uid)));
        let container = self.container.as_ref().map(|id| {
            format!(
                "{}:{}",
                self.runtime.as_deref().unwrap_or("container"),
                self.name.as_deref().unwrap_or(id.get(..12).unwrap_or(id))
            )
        });
        match (pod, container) {
            (Some(p), Some(c)) => format!("{p}/{c}"),
            (Some(p), None) => p,
            (None, Some(c)) => c,
            (None, None) => match (&self.unit, &self.qos) {
                (Some(unit), _) => unit.clone(),
                (None, Some(qos)) => format!("kubepods:{qos}"),
                (None, None) => String::new(),
            },
        }
    }

    /// Takes one component below `kubepods`: a QoS slice or directory, or
    /// a pod's. True when it was one.
    fn kube_part(&mut self, part: &str, parent: Option<&str>) -> bool {
        // systemd driver: kubepods-<qos>.slice, kubepods[-<qos>]-pod<uid>.slice.
        if let Some(rest) = part
            .strip_prefix("kubepods-")
            .and_then(|r| r.strip_suffix(".slice"))
        {
            let (qos, pod) = match rest.split_once("pod") {
                Some((q, uid)) => (q.trim_end_matches('-'), Some(uid)),
                None => (rest, None),
            };
            if let Some(uid) = pod {
                self.pod_uid = Some(uid.replace('_', "-"));
                self.qos = Some(qos_name(qos).into());
            } else if matches!(qos, "burstable" | "besteffort") {
                self.qos = Some(qos.into());
            } else {
                return false;
            }
            return true;
        }
        // cgroupfs driver: kubepods/<qos>/pod<uid>, kubepods/pod<uid>.
        if matches!(part, "burstable" | "besteffort") && parent == Some("kubepods") {
            self.qos = Some(part.into());
            return true;
        }
        if let Some(uid) = part.strip_prefix("pod").filter(|u| is_uid(u)) {
            self.pod_uid = Some(uid.into());
            if self.qos.is_none() {
                self.qos = Some("guaranteed".into());
            }
            return true;
        }
        false
    }
}

/// The QoS class of a pod slice's middle part (empty: guaranteed pods sit
/// straight under `kubepods.slice`).
fn qos_name(middle: &str) -> &str {
    if middle.is_empty() {
        "guaranteed"
    } else {
        middle
    }
}

/// A runtime's scope for one container: its runtime and id. Conmon's own
/// scopes (`libpod-conmon-<id>`, `crio-conmon-<id>`) are not containers.
fn container_scope(part: &str) -> Option<(&'static str, &str)> {
    let name = part.strip_suffix(".scope").unwrap_or(part);
    SCOPES.iter().find_map(|&(prefix, runtime)| {
        let id = name.strip_prefix(prefix)?;
        is_container_id(id).then_some((runtime, id))
    })
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod UID as the cgroupfs driver writes it (dashes) or the systemd
/// driver does (underscores).
fn is_uid(s: &str) -> bool {
    s.len() == 36
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "9a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b";
    const UID: &str = "1f0e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

    fn w(path: &str) -> Identity {
        Identity::from_path(path).unwrap_or_else(|| panic!("{path}: nothing recognized"))
    }

    fn some(s: &str) -> Option<String> {
        Some(s.into())
    }

    #[test]
    fn systemd_services_and_session_scopes_are_their_units() {
        assert_eq!(w("/system.slice/nginx.service").unit, some("nginx.service"));
        assert_eq!(
            w("/user.slice/user-1000.slice/session-3.scope").unit,
            some("session-3.scope")
        );
        // The user manager's own apps: the innermost unit.
        assert_eq!(
            w("/user.slice/user-1000.slice/user@1000.service/app.slice/app-term.scope").unit,
            some("app-term.scope")
        );
        // v1's memory hierarchy mirrors the same names.
        assert_eq!(w("/system.slice/cron.service").unit, some("cron.service"));
    }

    #[test]
    fn docker_containers_under_both_drivers() {
        let systemd = w(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(
            (systemd.runtime, systemd.container, systemd.unit),
            (some("docker"), some(ID), None)
        );
        let cgroupfs = w(&format!("/docker/{ID}"));
        assert_eq!(
            (cgroupfs.runtime, cgroupfs.container),
            (some("docker"), some(ID))
        );
    }

    #[test]
    fn podman_containers_root_rootless_and_nested() {
        let root = w(&format!("/machine.slice/libpod-{ID}.scope"));
        assert_eq!((root.runtime, root.container), (some("podman"), some(ID)));
        // With --cgroupns, the container's processes sit in a child.
        let nested = w(&format!("/machine.slice/libpod-{ID}.scope/container"));
        assert_eq!(nested.container, some(ID));
        let rootless = w(&format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope"
        ));
        assert_eq!(
            (rootless.runtime, rootless.container, rootless.unit),
            (some("podman"), some(ID), some("user@1000.service"))
        );
        // Conmon, which watches the container, is not it.
        assert_eq!(
            Identity::from_path(&format!("/machine.slice/libpod-conmon-{ID}.scope")),
            None
        );
        let cgroupfs = w(&format!("/libpod_parent/libpod-{ID}"));
        assert_eq!(cgroupfs.container, some(ID));
    }

    #[test]
    fn kubernetes_pods_under_the_systemd_driver() {
        let uid_ = UID.replace('-', "_");
        let burstable = w(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/\
             cri-containerd-{ID}.scope"
        ));
        assert_eq!(burstable.pod_uid, some(UID));
        assert_eq!(burstable.qos, some("burstable"));
        assert_eq!(
            (burstable.runtime, burstable.container),
            (some("containerd"), some(ID))
        );
        let besteffort = w(&format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid_}.slice/\
             crio-{ID}.scope"
        ));
        assert_eq!(
            (besteffort.qos, besteffort.runtime),
            (some("besteffort"), some("cri-o"))
        );
        let guaranteed = w(&format!(
            "/kubepods.slice/kubepods-pod{uid_}.slice/docker-{ID}.scope"
        ));
        assert_eq!(
            (guaranteed.qos, guaranteed.pod_uid),
            (some("guaranteed"), some(UID))
        );
        // The pod's own cgroup, above its containers.
        let pod = w(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice"
        ));
        assert_eq!((pod.pod_uid, pod.container), (some(UID), None));
        // A QoS slice alone.
        assert_eq!(
            w("/kubepods.slice/kubepods-besteffort.slice").qos,
            some("besteffort")
        );
        // CRI-O's conmon scope sits beside the container's.
        let conmon = w(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/\
             crio-conmon-{ID}.scope"
        ));
        assert_eq!((conmon.pod_uid, conmon.container), (some(UID), None));
    }

    #[test]
    fn kubernetes_pods_under_the_cgroupfs_driver() {
        let burstable = w(&format!("/kubepods/burstable/pod{UID}/{ID}"));
        assert_eq!(burstable.qos, some("burstable"));
        assert_eq!(burstable.pod_uid, some(UID));
        assert_eq!((burstable.container, burstable.runtime), (some(ID), None));
        let guaranteed = w(&format!("/kubepods/pod{UID}/{ID}"));
        assert_eq!(
            (guaranteed.qos, guaranteed.pod_uid),
            (some("guaranteed"), some(UID))
        );
        assert_eq!(w("/kubepods/besteffort").qos, some("besteffort"));
    }

    #[test]
    fn unknown_layouts_say_nothing() {
        for p in [
            "/",
            "",
            "/system.slice",
            "/user.slice/user-1000.slice",
            "/vmscope-overhead",
            "/process_api/104109f529f3cfb5d0432e9ce4f5bf0e",
            // A 64-hex name outside any runtime's parent is not taken for one.
            &format!("/mine/{ID}"),
            // A pod-like name outside kubepods.
            &format!("/pod{UID}"),
        ] {
            assert_eq!(Identity::from_path(p), None, "{p}");
        }
    }

    #[test]
    fn labels_are_short_and_name_the_container_when_known() {
        let docker = w(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(docker.label(), "docker:9a3b5c7d9e1f");
        assert_eq!(docker.clone().named(Some("web")).label(), "docker:web");
        let uid_ = UID.replace('-', "_");
        let pod = w(&format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/\
             cri-containerd-{ID}.scope"
        ));
        assert_eq!(pod.label(), "pod:1f0e2d3c/containerd:9a3b5c7d9e1f");
        let pod_only = w(&format!("/kubepods/burstable/pod{UID}"));
        assert_eq!(pod_only.label(), "pod:1f0e2d3c");
        assert_eq!(w("/system.slice/nginx.service").label(), "nginx.service");
        assert_eq!(w("/kubepods/besteffort").label(), "kubepods:besteffort");
        // A name is only a container's.
        assert_eq!(w("/system.slice/nginx.service").named(Some("x")).name, None);
    }

    #[test]
    fn serialized_fields_are_only_those_the_path_gave() {
        let v = serde_json::to_value(w(&format!("/system.slice/docker-{ID}.scope")))
            .expect("a workload serializes");
        assert_eq!(v, serde_json::json!({"runtime": "docker", "container": ID}));
    }
}
