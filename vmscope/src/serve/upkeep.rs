//! The exporter's state and upkeep: the rendered bodies and the figures
//! the connections share (the exporter's own metrics), the refresh every
//! interval, and the privileges given up once serving.

use std::{
    fmt::Write as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;

use crate::{
    flight::on_oom as oom,
    source::{Reading, Source, shed::Shed},
};

use super::export;
use super::export::{Format, State};
use super::{Burst, OPENMETRICS_EOF};

/// Why the exporter closed a connection itself, as the `reason` label of
/// `vmscope_exporter_connections_dropped_total`.
#[derive(Clone, Copy)]
pub(super) enum Dropped {
    /// Refused, or closed before its request head to make room, because
    /// its peer had `MAX_PER_PEER` connections; or its turn among the
    /// peer's `SERVED_PER_PEER` did not come within the head timeout.
    PeerLimit,
    /// The same at `MAX_CONNECTIONS`.
    ConnectionLimit,
    /// An idle keep-alive connection closed at `MAX_CONNECTIONS` to let
    /// in a peer holding fewer (see the server's `Conns::close_idle`).
    IdleKeepAlive,
    HeadTimeout,
    WriteTimeout,
}

impl Dropped {
    pub(super) const ALL: [Dropped; 5] = [
        Dropped::PeerLimit,
        Dropped::ConnectionLimit,
        Dropped::IdleKeepAlive,
        Dropped::HeadTimeout,
        Dropped::WriteTimeout,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Dropped::PeerLimit => "peer_limit",
            Dropped::ConnectionLimit => "connection_limit",
            Dropped::IdleKeepAlive => "idle_keep_alive",
            Dropped::HeadTimeout => "head_timeout",
            Dropped::WriteTimeout => "write_timeout",
        }
    }
}

/// The rendered bodies, replaced on every successful refresh.
#[derive(Clone)]
pub(super) struct Bodies {
    pub(super) prometheus: Bytes,
    /// Without its `# EOF` line, which follows the exporter's own metrics.
    pub(super) openmetrics: Bytes,
    /// When the sample they show was taken.
    pub(super) rendered: Instant,
}

/// What the connections share: the bodies and the exporter's own figures.
pub(super) struct Shared {
    pub(super) bodies: Mutex<Bodies>,
    pub(super) refresh_failures: AtomicU64,
    pub(super) dropped: [AtomicU64; Dropped::ALL.len()],
    /// The flight recorder's figures, with `--on-oom`.
    pub(super) flight: Option<Arc<oom::Stats>>,
}

impl Shared {
    pub(super) fn count(&self, why: Dropped) {
        self.dropped[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The exporter's own metrics, as of now, in `format`.
    pub(super) fn own_metrics(&self, format: Format, rendered: Instant) -> String {
        let mut out = String::with_capacity(1024);
        let age = &export::BODY_AGE;
        export::write_head(&mut out, format, age);
        let _ = writeln!(out, "{} {:.3}", age.name, rendered.elapsed().as_secs_f64());
        let failures = &export::REFRESH_FAILURES;
        export::write_head(&mut out, format, failures);
        let _ = writeln!(
            out,
            "{} {}",
            failures.name,
            self.refresh_failures.load(Ordering::Relaxed)
        );
        let dropped = &export::CONNECTIONS_DROPPED;
        export::write_head(&mut out, format, dropped);
        for why in Dropped::ALL {
            let _ = writeln!(
                out,
                "{}{{reason=\"{}\"}} {}",
                dropped.name,
                why.label(),
                self.dropped[why as usize].load(Ordering::Relaxed)
            );
        }
        if let Some(f) = &self.flight {
            flight_metrics(&mut out, f, format);
        }
        out
    }
}

/// The flight recorder's counters (`--on-oom`).
pub(super) fn flight_metrics(out: &mut String, f: &oom::Stats, format: Format) {
    let rows: [(&crate::model::catalogue::Family, &AtomicU64); 4] = [
        (&export::FLIGHT_WRITTEN, &f.written),
        (&export::FLIGHT_FAILED, &f.failed),
        (&export::FLIGHT_REMOVED, &f.removed),
        (&export::FLIGHT_SAMPLES_DROPPED, &f.samples_dropped),
    ];
    for (family, n) in rows {
        export::write_head(out, format, family);
        let _ = writeln!(out, "{} {}", family.name, n.load(Ordering::Relaxed));
    }
}

/// Turns reads into the bodies served.
pub(super) struct Exporter {
    pub(super) state: State,
    pub(super) per_process: usize,
    pub(super) interval: Duration,
    /// Refreshes that failed in a row.
    pub(super) failures: Burst,
    /// `--history`: the flight recorder (and `--on-oom`'s writer).
    pub(super) flight: Option<oom::Recorder>,
}

impl Exporter {
    /// The bodies for this read; an error for a read that failed.
    pub(super) fn render(&mut self, r: anyhow::Result<Reading>) -> anyhow::Result<Bodies> {
        let r = r?;
        if let Some(f) = self.flight.as_mut() {
            f.push(&r.sample, &r.probes);
        }
        self.state.apply(r.sample);
        self.state.probes = r.probes;
        if let Some(shed) = r.shed {
            eprintln!(
                "{}",
                shed_line(&shed, "the swap probe no longer waits: ", None, None)
            );
        }
        let om = export::render(&self.state, Format::OpenMetrics, self.per_process);
        let om = om.strip_suffix(OPENMETRICS_EOF).unwrap_or(&om).to_owned();
        Ok(Bodies {
            prometheus: Bytes::from(export::render(
                &self.state,
                Format::Prometheus,
                self.per_process,
            )),
            openmetrics: Bytes::from(om),
            rendered: Instant::now(),
        })
    }

    /// Serves this read's bodies from now on, or keeps the last good ones
    /// (logged once per burst of failures).
    pub(super) fn refresh(&mut self, r: anyhow::Result<Reading>, shared: &Shared) {
        match self.render(r) {
            Ok(b) => {
                if let Some((n, took)) = self.failures.end() {
                    eprintln!(
                        "vmscope serve: refreshing works again after {n} failed refreshes \
                         over {:.1} s",
                        took.as_secs_f64()
                    );
                }
                if let Ok(mut slot) = shared.bodies.lock() {
                    *slot = b;
                }
            }
            Err(e) => {
                shared.refresh_failures.fetch_add(1, Ordering::Relaxed);
                if self.failures.fail() {
                    let age = shared
                        .bodies
                        .lock()
                        .map(|b| b.rendered.elapsed().as_secs_f64())
                        .unwrap_or_default();
                    eprintln!(
                        "vmscope serve: refreshing the metrics failed: {e:#}; serving the last \
                         good ones ({age:.1} s old) and retrying every {}",
                        humantime::format_duration(self.interval)
                    );
                }
            }
        }
    }
}

/// Gives up every capability the exporter no longer needs, for good, and
/// says so in one line. The sampling thread keeps what reading and the
/// deferred swap probe need (see `source::shed`); this thread, which talks
/// to the network, keeps nothing: it only accepts on a socket already
/// bound and renders owned samples.
pub(super) fn shed_privileges(source: &Source, writer: Option<&str>) -> String {
    let shed = source.shed();
    let own = crate::source::kernel::privdrop::keep_only(&[]).err();
    shed_line(&shed, "", Some(own), writer)
}

/// The privileges line: what the sampling thread kept and why, what it
/// dropped, and (at the first drop) how the other threads stand.
/// `writer`: what the OOM writer, which gave its own up itself, holds.
pub(super) fn shed_line(
    shed: &Shed,
    now: &str,
    own: Option<Option<String>>,
    writer: Option<&str>,
) -> String {
    use crate::source::kernel::privdrop;
    if let Some(why) = &shed.kept {
        return format!("vmscope serve: privileges: {now}{why}");
    }
    let mut why = Vec::new();
    if shed.for_swap {
        why.push("while the swap probe waits for a swap device (attaching it needs them)".into());
    }
    if let Some(c) = shed.for_reads {
        why.push(format!(
            "{c} because this kernel refuses map reads without it \
             (kernel.unprivileged_bpf_disabled is set, kernels before 6.5)"
        ));
    }
    let kept = if shed.after.is_empty() {
        "the sampling thread kept no capabilities (the maps are read through open descriptors)"
            .to_string()
    } else {
        format!(
            "the sampling thread kept {} {}",
            privdrop::names(&shed.after),
            why.join("; ")
        )
    };
    let dropped: ::caps::CapsHashSet = shed.before.difference(&shed.after).copied().collect();
    let dropped = match dropped.len() {
        0 => "dropped none".to_string(),
        n if n <= 4 => format!("dropped {}", privdrop::names(&dropped)),
        n => format!("dropped the other {n}"),
    };
    let threads = match own {
        None => String::new(),
        Some(Some(e)) => format!("; the serving thread could not drop its own: {e}"),
        // This thread has given its up; the sampling thread keeps what it
        // said above, and the OOM writer and the container-name watcher
        // gave theirs up themselves.
        Some(None) => {
            let sampling = usize::from(!shed.after.is_empty());
            match privdrop::other_threads_holding().saturating_sub(sampling) {
                0 => "; the serving thread keeps none".to_string(),
                n => format!("; the serving thread keeps none; {n} other threads keep theirs"),
            }
        }
    };
    let threads = match writer {
        Some(w) => format!("{threads}; {w}"),
        None => threads,
    };
    let root = if rustix::process::getuid().is_root() || rustix::process::geteuid().is_root() {
        "; still uid 0, so root's file permissions remain: run it as its own user \
         (vmscope/dist/vmscope-serve.service) to give those up too"
    } else {
        ""
    };
    format!("vmscope serve: privileges: {now}{kept}; {dropped}{threads}{root}")
}
