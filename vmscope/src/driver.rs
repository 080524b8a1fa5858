//! What `record`, `top` and `serve` share around their loops: the
//! single-threaded runtime they run on and the signals that end them. What
//! each does on each signal stays in its loop; the reads come from the
//! sampling thread (`source::thread`), which keeps the interval.

use std::future::Future;

use anyhow::Context as _;
use tokio::signal::unix::{self, SignalKind};

/// Runs `f` to completion on a current-thread runtime: the loops wait on
/// timers, signals and sockets, and the sampling they do is short.
pub fn run<T>(f: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

/// A signal a loop can end on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
    Hup,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
            Signal::Hup => "SIGHUP",
        }
    }

    pub fn number(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Hup => libc::SIGHUP,
        }
    }

    fn kind(self) -> SignalKind {
        SignalKind::from_raw(self.number())
    }
}

/// Handlers for some signals. Once installed, a signal no longer has its
/// default action (ending the process): it waits for [`Signals::recv`].
pub struct Signals {
    int: Option<unix::Signal>,
    term: Option<unix::Signal>,
    hup: Option<unix::Signal>,
}

impl Signals {
    /// Installs handlers for `which`, in that order; must be called on the
    /// runtime.
    pub fn install(which: &[Signal]) -> anyhow::Result<Self> {
        let mut s = Signals {
            int: None,
            term: None,
            hup: None,
        };
        for &sig in which {
            let handler = unix::signal(sig.kind())
                .with_context(|| format!("installing {} handler", sig.name()))?;
            *s.slot(sig) = Some(handler);
        }
        Ok(s)
    }

    fn slot(&mut self, sig: Signal) -> &mut Option<unix::Signal> {
        match sig {
            Signal::Int => &mut self.int,
            Signal::Term => &mut self.term,
            Signal::Hup => &mut self.hup,
        }
    }

    /// The next of the installed signals to arrive (never, with none).
    pub async fn recv(&mut self) -> Signal {
        async fn one(s: Option<&mut unix::Signal>) {
            match s {
                // None only once the runtime is shutting down: as good as
                // the signal.
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = one(self.int.as_mut()) => Signal::Int,
            () = one(self.term.as_mut()) => Signal::Term,
            () = one(self.hup.as_mut()) => Signal::Hup,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_and_numbered_as_the_kernel_does() {
        assert_eq!(
            [Signal::Int, Signal::Term, Signal::Hup].map(|s| (s.name(), s.number())),
            [("SIGINT", 2), ("SIGTERM", 15), ("SIGHUP", 1)]
        );
    }

    #[test]
    fn recv_says_which_signal_arrived() {
        run(async {
            let mut s = Signals::install(&[Signal::Term, Signal::Hup])?;
            // SAFETY: raise only queues a signal for this thread; its
            // handler is installed above.
            unsafe { libc::raise(libc::SIGHUP) };
            assert_eq!(s.recv().await, Signal::Hup);
            Ok(())
        })
        .expect("the runtime runs");
    }
}
