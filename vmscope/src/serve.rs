//! `vmscope serve`: a Prometheus/OpenMetrics exporter. Samples every
//! interval with the same loader and collector as `record`, renders both
//! text formats once per interval, and serves the cached bytes, so a scrape
//! costs a copy of a reference however many arrive at once.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Incoming, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::signal::unix::{SignalKind, signal};

use crate::{
    cli::ServeArgs,
    collect::Collector,
    exit,
    export::{self, Format, State},
    kernel::caps::Privileges,
    loader::{self, LoadOptions},
};

/// The largest request head accepted (hyper's smallest buffer).
pub const MAX_HEAD_BYTES: usize = 8192;

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 512;

/// The rendered bodies, replaced every interval.
#[derive(Clone, Default)]
struct Bodies {
    prometheus: Bytes,
    openmetrics: Bytes,
}

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    if args.interval.is_zero() {
        return Err(exit::failure(
            exit::USAGE,
            "--interval must be greater than zero",
        ));
    }
    Privileges::current().require_bpf()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| {
            exit::failure(
                exit::FAILURE,
                format!(
                    "cannot listen on {}: {e}; choose another address with --listen",
                    args.listen
                ),
            )
        })?;
    let mut probes = loader::load(&LoadOptions {
        filtered: false,
        swap: loader::SwapAttach::Auto,
        // The exporter has no rmap series yet.
        sample_hz: 0,
    })?;
    let mut collector = Collector::new(Instant::now());
    let mut state = State {
        fault_source: Some(probes.fault_source),
        ..Default::default()
    };
    let bodies = Arc::new(Mutex::new(Bodies::default()));
    let mut refresh = |state: &mut State, probes: &mut loader::Loaded| -> anyhow::Result<()> {
        state.apply(collector.sample(probes)?);
        state.probes = probes.probes.clone();
        let b = Bodies {
            prometheus: Bytes::from(export::render(state, Format::Prometheus, args.per_process)),
            openmetrics: Bytes::from(export::render(state, Format::OpenMetrics, args.per_process)),
        };
        if let Ok(mut slot) = bodies.lock() {
            *slot = b;
        }
        Ok(())
    };
    refresh(&mut state, &mut probes)?;
    let local: SocketAddr = listener.local_addr().context("reading the bound address")?;
    eprintln!("vmscope serve: listening on http://{local}/metrics");

    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + args.interval, args.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    loop {
        tokio::select! {
            _ = ticker.tick() => refresh(&mut state, &mut probes)?,
            permit = permits.clone().acquire_owned() => {
                let Ok(permit) = permit else { break };
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let bodies = bodies.clone();
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |req| {
                                let bodies = bodies.clone();
                                async move { Ok::<_, std::convert::Infallible>(respond(&req, &bodies)) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .max_buf_size(MAX_HEAD_BYTES)
                                .timer(TokioTimer::new())
                                .header_read_timeout(Duration::from_secs(10))
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                            drop(permit);
                        });
                    }
                    _ = ticker.tick() => refresh(&mut state, &mut probes)?,
                    _ = sigterm.recv() => break,
                    _ = sigint.recv() => break,
                }
            }
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
    }
    crate::teardown::release(probes);
    eprintln!("vmscope serve: stopped");
    Ok(0)
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn respond(req: &Request<Incoming>, bodies: &Mutex<Bodies>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let has_body = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    if has_body {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "requests carry no body here\n",
        );
    }
    match req.uri().path() {
        "/metrics" => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::from_accept(accept);
            let b = bodies.lock().map(|b| b.clone()).unwrap_or_default();
            let body = match format {
                Format::Prometheus => b.prometheus,
                Format::OpenMetrics => b.openmetrics,
            };
            let mut r = Response::new(Full::new(body));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(format.content_type()),
            );
            r
        }
        "/healthz" => text(StatusCode::OK, "ok\n"),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics or /healthz\n",
        ),
    }
}
