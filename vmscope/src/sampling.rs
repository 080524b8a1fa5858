//! The setup `top`, `serve` and `record` share: the checks clap cannot make
//! on their sampling arguments, and the loader's options built from them.

use crate::{
    cli::{ProcessArgs, SamplingArgs},
    exit,
    source::loader::{LoadOptions, SwapAttach},
};

impl SamplingArgs {
    /// A zero interval is a usage error. The interval's parser already
    /// refuses it; this keeps the promise wherever the arguments come from.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.interval.is_zero() {
            return Err(exit::failure(
                exit::USAGE,
                "--interval must be greater than zero",
            ));
        }
        // A method named but not offered is refused before anything loads.
        self.wss_setup(false, false)?;
        Ok(())
    }

    /// The working-set measure asked for (`--working-set`), over every
    /// process when `system` (nothing is followed); `cgroup` when the scope
    /// is a cgroup's. A method asked for by name that this kernel does not
    /// offer is a usage error naming why.
    pub fn wss_setup(
        &self,
        system: bool,
        cgroup: bool,
    ) -> anyhow::Result<Option<crate::model::wss::WssSetup>> {
        use crate::{cli::WssMethodArg, model::wss::WssMethod};
        if !self.working_set {
            return Ok(None);
        }
        let methods = crate::source::wss::methods();
        let offered = |m: WssMethod| methods.iter().find(|s| s.method == m).filter(|s| s.offered);
        let refuse = |name: &str, why: &str| {
            exit::failure(
                exit::USAGE,
                format!(
                    "--wss-method {name}: {why}; use --wss-method referenced_scan, \
                     or see vmscope doctor"
                ),
            )
        };
        let detail = |m: WssMethod| {
            methods
                .iter()
                .find(|s| s.method == m)
                .map(|s| s.detail.clone())
                .unwrap_or_default()
        };
        let method = match self.wss_method {
            WssMethodArg::ReferencedScan => WssMethod::ReferencedScan,
            WssMethodArg::Mglru => match offered(WssMethod::Mglru) {
                Some(_) => WssMethod::Mglru,
                None => return Err(refuse("mglru", &detail(WssMethod::Mglru))),
            },
            WssMethodArg::Damon => match offered(WssMethod::Damon) {
                Some(_) if system => {
                    return Err(refuse(
                        "damon",
                        "DAMON watches processes, one kdamond each, not the whole system: \
                         follow a command, -p PID or --cgroup",
                    ));
                }
                Some(_) => WssMethod::Damon,
                None => return Err(refuse("damon", &detail(WssMethod::Damon))),
            },
            WssMethodArg::Auto if (system || cgroup) && offered(WssMethod::Mglru).is_some() => {
                WssMethod::Mglru
            }
            WssMethodArg::Auto => WssMethod::ReferencedScan,
        };
        Ok(Some(crate::model::wss::WssSetup::new(
            method,
            u64::try_from(self.wss_window.as_nanos()).unwrap_or(u64::MAX),
            system,
            methods,
        )))
    }

    /// The loader's options for a command that follows every process and
    /// takes no kernel-stack samples (`serve`: the exporter has no rmap
    /// series yet). [`ProcessArgs::load_options`] adds what `top` and
    /// `record` follow.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            filtered: false,
            swap: SwapAttach::Auto,
            sample_hz: 0,
            mmap_lock: self.mmap_lock,
            rmap_maintenance: false,
            syscall_latency: self.syscall_latency,
            thp_faults: self.thp_faults,
        }
    }
}

impl ProcessArgs {
    /// Each `-p` pid names a running process.
    pub fn check(&self) -> anyhow::Result<()> {
        for &pid in &self.pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(exit::failure(
                    exit::USAGE,
                    format!("-p {pid}: no such process"),
                ));
            }
        }
        Ok(())
    }

    /// The loader's options for `top` and `record`: per-process figures
    /// filtered when pids are given, kernel stacks sampled at `--sample-hz`.
    pub fn load_options(&self, sampling: &SamplingArgs) -> LoadOptions {
        LoadOptions {
            filtered: !self.pid.is_empty(),
            sample_hz: self.sample_hz,
            ..sampling.load_options()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Command {
        let argv = std::iter::once("vmscope").chain(args.iter().copied());
        Cli::try_parse_from(argv).expect("parses").command
    }

    #[test]
    fn serve_follows_everyone_and_samples_no_stacks() {
        let Command::Serve(s) = parse(&["serve", "--mmap-lock"]) else {
            panic!("not serve")
        };
        let o = s.sampling.load_options();
        assert!(!o.filtered);
        assert_eq!(o.sample_hz, 0);
        assert!(o.mmap_lock);
        assert!(!o.rmap_maintenance);
        assert!(!o.syscall_latency);
        let Command::Serve(s) = parse(&["serve", "--syscall-latency"]) else {
            panic!("not serve")
        };
        assert!(s.sampling.load_options().syscall_latency);
        assert!(!s.sampling.load_options().thp_faults);
        let Command::Serve(s) = parse(&["serve", "--thp-faults"]) else {
            panic!("not serve")
        };
        assert!(s.sampling.load_options().thp_faults);
    }

    #[test]
    fn pids_filter_and_sample_hz_reaches_the_loader() {
        let Command::Top(t) = parse(&["top", "-p", "1", "--sample-hz", "7"]) else {
            panic!("not top")
        };
        let o = t.process.load_options(&t.sampling);
        assert!(o.filtered);
        assert_eq!(o.sample_hz, 7);
        assert!(!o.mmap_lock);
        let Command::Record(r) = parse(&["record"]) else {
            panic!("not record")
        };
        let o = r.process.load_options(&r.sampling);
        assert!(!o.filtered);
        assert_eq!(o.sample_hz, crate::model::rmap::DEFAULT_HZ);
    }

    #[test]
    fn each_command_words_the_shared_interval_for_itself() {
        use clap::CommandFactory as _;
        let cli = Cli::command();
        let help = |cmd: &str| {
            let sub = cli.find_subcommand(cmd).expect(cmd);
            let arg = sub.get_arguments().find(|a| a.get_id() == "interval");
            arg.and_then(|a| a.get_help()).expect(cmd).to_string()
        };
        assert!(help("top").starts_with("Refresh interval"));
        assert!(help("serve").starts_with("How often the metrics are refreshed"));
        assert!(help("record").starts_with("Sampling interval for the time series"));
    }

    #[test]
    fn a_window_without_the_working_set_is_a_usage_error() {
        let argv = ["vmscope", "record", "--wss-window", "1m"];
        let e = Cli::try_parse_from(argv).expect_err("rejects");
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let Command::Record(r) = parse(&["record", "--working-set"]) else {
            panic!("not record")
        };
        assert_eq!(r.sampling.wss_window, std::time::Duration::from_secs(10));
        let setup = r
            .sampling
            .wss_setup(false, false)
            .expect("auto")
            .expect("asked");
        // Following a process, auto keeps the per-process scan.
        assert_eq!(setup.method, crate::model::wss::WssMethod::ReferencedScan);
        assert!(
            setup
                .methods
                .iter()
                .any(|m| m.used && m.method == setup.method)
        );
        // Asked by name: used where the kernel offers it, else one usage
        // error that says why.
        for (name, method, offered) in [
            (
                "mglru",
                crate::model::wss::WssMethod::Mglru,
                crate::source::mglru::status().offered,
            ),
            (
                "damon",
                crate::model::wss::WssMethod::Damon,
                crate::source::damon::status().offered,
            ),
        ] {
            let Command::Record(r) = parse(&["record", "--working-set", "--wss-method", name])
            else {
                panic!("not record")
            };
            match r.sampling.wss_setup(false, false) {
                Ok(Some(s)) => assert!(offered && s.method == method, "{name}"),
                Ok(None) => panic!("asked"),
                Err(e) => {
                    assert!(!offered, "{name}");
                    assert!(
                        e.to_string().starts_with(&format!("--wss-method {name}: ")),
                        "{e}"
                    );
                }
            }
        }
        // DAMON: never system-wide, offered or not.
        let Command::Record(r) = parse(&["record", "--working-set", "--wss-method", "damon"])
        else {
            panic!("not record")
        };
        let e = r.sampling.wss_setup(true, false).expect_err("system-wide");
        assert!(e.to_string().starts_with("--wss-method damon: "), "{e}");
    }

    #[test]
    fn record_pids_still_conflict_with_a_command() {
        let argv = ["vmscope", "record", "-p", "1", "--", "true"];
        let e = Cli::try_parse_from(argv).expect_err("rejects");
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
    }
}
