//! tbench, dbench's network mode (sahlberg/dbench `sockio.c`, `tbench_srv.c`), as
//! mmtests runs it: `tbench -t T --loadfile client-tiny.txt N 127.0.0.1` against a
//! `tbench_srv` on the same machine. Each of the N clients has one loopback TCP
//! connection (TCP_NODELAY) served by its own forked server process, so there are
//! 2N busy processes in N synchronous pairs.
//!
//! One load-file line is one request/response exchange (`do_packets`): the client
//! writes the whole request in one write (its first 4 bytes carry the length, the
//! next 4 the wanted reply length), the server reads the 4-byte header, then the
//! rest (looping until all arrived), writes the reply in one write, and the client
//! reads the 4-byte header, then the body with MSG_WAITALL. Here a read returns as
//! soon as some bytes arrived, so both sides loop until the whole message is in.
//! The message sizes are not in the bytes moved (the simulator carries no content):
//! the client puts the request in the pair's shared slot before writing it, and the
//! server looks at the slot once the header has arrived, which is what reading the
//! header tells the real server.
//!
//! The operation mix stands in for the NetBench load file `client-tiny.txt`. It is
//! a judgement, not the real file: shares in per mille, sizes from dbench 4's
//! `sockio.c` with file names of typical length; the shares are roughly those of
//! dbench's operation table, where ReadX and WriteX are about a third of all
//! operations and carry nearly all the bytes.
//!
//! | operation | ‰   | request bytes | reply bytes   |
//! |-----------|-----|---------------|---------------|
//! | NTCreateX | 170 | 100           | 87            |
//! | Qpathinfo | 160 | 95            | 71            |
//! | Close     | 130 | 47            | 39            |
//! | Qfileinfo | 80  | 59            | 71            |
//! | Flush     | 60  | 41            | 39            |
//! | Unlink    | 40  | 83            | 39            |
//! | ReadX     | 270 | 59            | 59 + size     |
//! | WriteX    | 90  | 59 + size     | 55            |
//!
//! ReadX/WriteX payload `size` is 4 KiB (600 ‰), 16 KiB (250 ‰) or 64 KiB
//! (150 ‰), mean exactly 16 KiB: about 5.9 KB of payload per operation against
//! about 0.2 KB of headers and metadata, so payload dominates the bytes moved as
//! in tbench. Sizes are powers of two so that the payload histogram counts each
//! size exactly (see `payload_bytes`).
//!
//! Results as tbench prints its final line: throughput counts only ReadX/WriteX
//! payload bytes completed inside the measured window (`runtime_ms` after
//! `warmup_ms`), in decimal MB/s; max_latency is the longest client-side
//! operation (request write to reply read) in the window.
//!
//! User-space work per exchange, stated rather than measured: the server 1 µs
//! (`tbench_srv` only converts two header words between its reads and write), the
//! client 2 µs (dbench parses the load-file line, looks up the operation and does
//! its latency bookkeeping).
//!
//! Not modelled: the `tbench_srv` listener process (main makes the connections and
//! forks the server children itself), dbench's start barrier and its once-a-second
//! progress lines, the per-operation table, the load file's Sleep lines.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;

/// `Op::Record` metrics: one sample per ReadX/WriteX, valued its payload size in bytes.
pub const PAYLOAD_BYTES: u32 = 1;
/// `Op::Record` metrics: client-side latency of every operation, ns.
pub const OP_LATENCY: u32 = 2;

/// Most clients a spec may ask for (2 processes each).
const MAX_CLIENTS: u64 = 4096;

/// The length word at the front of every message.
const HEADER_BYTES: u64 = 4;
/// `nb_setup()`: the first exchange on a new connection, 8 bytes each way.
const SETUP_BYTES: u64 = 8;
/// ReadX: request bytes, and reply bytes besides the payload (39 + 20).
const READX_REQUEST_BYTES: u64 = 59;
const READX_REPLY_OVERHEAD_BYTES: u64 = 59;
/// WriteX: request bytes besides the payload (39 + 20), and reply bytes (39 + 16).
const WRITEX_REQUEST_OVERHEAD_BYTES: u64 = 59;
const WRITEX_REPLY_BYTES: u64 = 55;

/// User-space work of the server per exchange (see the module comment).
const SERVER_COMPUTE_NS: u64 = 1_000;
/// User-space work of the client per exchange (see the module comment).
const CLIENT_COMPUTE_NS: u64 = 2_000;

/// One kind of operation of the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A metadata exchange of fixed sizes.
    Meta {
        request_bytes: u64,
        reply_bytes: u64,
    },
    ReadX,
    WriteX,
}

/// (name, share in per mille, kind); the shares add up to 1000.
const OP_MIX: [(&str, u64, Kind); 8] = [
    ("NTCreateX", 170, Kind::Meta { request_bytes: 100, reply_bytes: 87 }),
    ("Qpathinfo", 160, Kind::Meta { request_bytes: 95, reply_bytes: 71 }),
    ("Close", 130, Kind::Meta { request_bytes: 47, reply_bytes: 39 }),
    ("Qfileinfo", 80, Kind::Meta { request_bytes: 59, reply_bytes: 71 }),
    ("Flush", 60, Kind::Meta { request_bytes: 41, reply_bytes: 39 }),
    ("Unlink", 40, Kind::Meta { request_bytes: 83, reply_bytes: 39 }),
    ("ReadX", 270, Kind::ReadX),
    ("WriteX", 90, Kind::WriteX),
];

/// ReadX/WriteX payload sizes: (share in per mille, bytes); the shares add up to
/// 1000. Powers of two, each in its own histogram bucket, so counts are exact.
const SIZE_MIX: [(u64, u64); 3] = [(600, 4096), (250, 16_384), (150, 65_536)];

/// Picks the entry whose cumulative share first exceeds a draw in 0..1000 (the
/// shares add up to 1000, so one always does).
fn pick<T>(mix: impl IntoIterator<Item = (u64, T)>, draw_per_mille: u64) -> T {
    let mut below = 0;
    for (share, item) in mix {
        below += share;
        if draw_per_mille < below {
            return item;
        }
    }
    panic!("tbench: mix shares add up to at most {below}, draw {draw_per_mille}")
}

/// One request/response exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exchange {
    request_bytes: u64,
    reply_bytes: u64,
    /// ReadX/WriteX payload counted as throughput; 0 for everything else.
    payload_bytes: u64,
    /// Whether its latency is recorded (load-file operations, not the setup).
    timed: bool,
}

impl Exchange {
    fn setup() -> Exchange {
        Exchange { request_bytes: SETUP_BYTES, reply_bytes: SETUP_BYTES, payload_bytes: 0, timed: false }
    }

    /// Draws the next operation of the mix.
    fn draw(rng: &mut SimRng) -> Exchange {
        match pick(OP_MIX.iter().map(|&(_, share, kind)| (share, kind)), rng.range(0, 999)) {
            Kind::Meta { request_bytes, reply_bytes } => Exchange { request_bytes, reply_bytes, payload_bytes: 0, timed: true },
            Kind::ReadX => {
                let size = pick(SIZE_MIX, rng.range(0, 999));
                Exchange {
                    request_bytes: READX_REQUEST_BYTES,
                    reply_bytes: READX_REPLY_OVERHEAD_BYTES + size,
                    payload_bytes: size,
                    timed: true,
                }
            }
            Kind::WriteX => {
                let size = pick(SIZE_MIX, rng.range(0, 999));
                Exchange {
                    request_bytes: WRITEX_REQUEST_OVERHEAD_BYTES + size,
                    reply_bytes: WRITEX_REPLY_BYTES,
                    payload_bytes: size,
                    timed: true,
                }
            }
        }
    }
}

/// Total ReadX/WriteX payload bytes in the window: the payload histogram holds one
/// sample per operation valued its size, and every size of `SIZE_MIX` has a bucket
/// of its own, so count × size per size is exact.
pub fn payload_bytes(res: &RunResult) -> u64 {
    let Some(h) = res.metrics.get(&PAYLOAD_BYTES) else { return 0 };
    let counted: u64 = SIZE_MIX.iter().map(|&(_, size)| h.count_at(size)).sum();
    debug_assert_eq!(counted, h.len(), "a payload sample outside SIZE_MIX");
    SIZE_MIX.iter().map(|&(_, size)| size * h.count_at(size)).sum()
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tbench {
    pub clients: u64,
    pub runtime_ms: u64,
    pub warmup_ms: u64,
}

impl Tbench {
    /// Reads `clients=` (tbench's N, required), `runtime_ms=` (10000; mmtests'
    /// `-t 120` is 120 s, shortened because a simulated second is costly) and
    /// `warmup_ms=` (2000).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        // u64::MAX stands for "absent": u64_in returns the default unchecked.
        let clients = p.u64_in("clients", u64::MAX, 1, MAX_CLIENTS)?;
        if clients == u64::MAX {
            return Err(SpecError::new(
                "workload tbench clients",
                "(missing)",
                format!("clients=N, an integer from 1 to {MAX_CLIENTS}, e.g. 'tbench clients=4'"),
            ));
        }
        Ok(Tbench {
            clients,
            runtime_ms: p.u64_in("runtime_ms", 10_000, 1, 100_000_000)?,
            warmup_ms: p.u64_in("warmup_ms", 2_000, 0, 100_000_000)?,
        })
    }

    pub fn banner(&self) -> String {
        format!(
            "tbench: {} clients, each with its own tbench_srv process over loopback TCP; synthetic NetBench mix (not client-tiny.txt); runtime {} ms after {} ms warmup",
            self.clients, self.runtime_ms, self.warmup_ms
        )
    }

    /// tbench's final line.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let mb_per_s = Self::mb_per_s(res);
        let max_latency_ms = res.metrics.get(&OP_LATENCY).map_or(0, |h| h.max()) as f64 / 1e6;
        format!("Throughput {mb_per_s:.4} MB/sec  {n} clients  {n} procs  max_latency={max_latency_ms:.3} ms", n = self.clients)
    }

    /// Payload megabytes (10^6 bytes, as tbench divides) per second of the window.
    pub fn mb_per_s(res: &RunResult) -> f64 {
        let window_s = res.elapsed_ns().max(1) as f64 / 1e9;
        payload_bytes(res) as f64 / 1e6 / window_s
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(Main {
            t: self.clone(),
            stop: Rc::new(Cell::new(false)),
            chans: Vec::new(),
            pairs: Vec::new(),
            forked: 0,
            timing: None,
            reaped: 0,
        })
    }
}

/// What the client put on the wire last, as the server learns it from the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Request {
    /// Nothing sent yet.
    None,
    Exchange {
        request_bytes: u64,
        reply_bytes: u64,
    },
    /// The client closed the connection: the server's read returns 0 and it exits.
    Close,
}

/// Where the result of the client's previous operation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientPhase {
    /// Between exchanges: the last result means nothing.
    Idle,
    /// Waiting for the clock read that starts an exchange.
    Start,
    /// The request write completed.
    Sent,
    /// A read of the reply's header returned.
    Header,
    /// A read of the reply's body returned.
    Body,
    /// Waiting for the clock read that ends an exchange.
    End,
    /// The close was sent.
    Closed,
}

struct Client {
    stop: Rc<Cell<bool>>,
    request: Rc<Cell<Request>>,
    to_server: ChanId,
    from_server: ChanId,
    phase: ClientPhase,
    /// Ops to run before looking at the phase again (their results are ignored).
    pending: VecDeque<Op>,
    current: Exchange,
    /// Bytes of the current header or body read so far.
    got_bytes: u64,
    start_ns: u64,
    setup_done: bool,
}

impl Client {
    fn read_reply(&mut self, want_bytes: u64) -> Op {
        Op::Read { chan: self.from_server, bytes: want_bytes - self.got_bytes }
    }
}

impl Program for Client {
    fn next(&mut self, last: OpResult, rng: &mut SimRng) -> Op {
        if let Some(op) = self.pending.pop_front() {
            return op;
        }
        match (self.phase, last) {
            (ClientPhase::Idle, _) => {
                if self.stop.get() {
                    // close(): the server sees end of file. Modelled as a header's
                    // worth of bytes so that the server's pending read returns.
                    self.request.set(Request::Close);
                    self.phase = ClientPhase::Closed;
                    return Op::Write { chan: self.to_server, bytes: HEADER_BYTES };
                }
                self.current = if self.setup_done { Exchange::draw(rng) } else { Exchange::setup() };
                self.setup_done = true;
                self.phase = ClientPhase::Start;
                Op::Clock
            }
            (ClientPhase::Start, OpResult::Time(now_ns)) => {
                self.start_ns = now_ns;
                let Exchange { request_bytes, reply_bytes, .. } = self.current;
                self.request.set(Request::Exchange { request_bytes, reply_bytes });
                self.phase = ClientPhase::Sent;
                Op::Write { chan: self.to_server, bytes: request_bytes }
            }
            (ClientPhase::Sent, _) => {
                self.phase = ClientPhase::Header;
                self.got_bytes = 0;
                self.read_reply(HEADER_BYTES)
            }
            (ClientPhase::Header, OpResult::Bytes(n)) => {
                self.got_bytes += n;
                if self.got_bytes < HEADER_BYTES {
                    return self.read_reply(HEADER_BYTES);
                }
                // The reply always carries more than its header.
                self.phase = ClientPhase::Body;
                self.got_bytes = 0;
                self.read_reply(self.current.reply_bytes - HEADER_BYTES)
            }
            (ClientPhase::Body, OpResult::Bytes(n)) => {
                self.got_bytes += n;
                let body_bytes = self.current.reply_bytes - HEADER_BYTES;
                if self.got_bytes < body_bytes {
                    return self.read_reply(body_bytes);
                }
                self.phase = ClientPhase::End;
                Op::Clock
            }
            (ClientPhase::End, OpResult::Time(now_ns)) => {
                self.phase = ClientPhase::Idle;
                if self.current.timed {
                    self.pending.push_back(Op::Record { metric: OP_LATENCY, value: now_ns - self.start_ns });
                }
                if self.current.payload_bytes > 0 {
                    self.pending.push_back(Op::Record { metric: PAYLOAD_BYTES, value: self.current.payload_bytes });
                }
                self.pending.push_back(Op::Compute { ns: CLIENT_COMPUTE_NS });
                self.pending.pop_front().expect("queued")
            }
            (ClientPhase::Closed, _) => Op::Exit,
            (phase, last) => panic!("tbench client: result {last:?} in phase {phase:?}"),
        }
    }
}

/// Where the result of the server's previous operation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerPhase {
    /// Ready for the next request: the last result (a reply write) means nothing.
    Idle,
    /// A read of the request's header returned.
    Header,
    /// A read of the request's body returned.
    Body,
    /// The bookkeeping compute ran; the reply is next.
    Reply,
}

struct Server {
    request: Rc<Cell<Request>>,
    to_server: ChanId,
    from_server: ChanId,
    phase: ServerPhase,
    got_bytes: u64,
    request_bytes: u64,
    reply_bytes: u64,
}

impl Server {
    fn read_request(&mut self, want_bytes: u64) -> Op {
        Op::Read { chan: self.to_server, bytes: want_bytes - self.got_bytes }
    }
}

impl Program for Server {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        match (self.phase, last) {
            (ServerPhase::Idle, _) => {
                self.phase = ServerPhase::Header;
                self.got_bytes = 0;
                self.read_request(HEADER_BYTES)
            }
            (ServerPhase::Header, OpResult::Bytes(n)) => {
                // Bytes arrived, so the client has set the request slot.
                let (request_bytes, reply_bytes) = match self.request.get() {
                    Request::Exchange { request_bytes, reply_bytes } => (request_bytes, reply_bytes),
                    Request::Close => return Op::Exit,
                    Request::None => panic!("tbench_srv: bytes arrived before any request"),
                };
                self.got_bytes += n;
                if self.got_bytes < HEADER_BYTES {
                    return self.read_request(HEADER_BYTES);
                }
                self.request_bytes = request_bytes;
                self.reply_bytes = reply_bytes;
                // Every request carries more than its header.
                self.phase = ServerPhase::Body;
                self.got_bytes = 0;
                self.read_request(self.request_bytes - HEADER_BYTES)
            }
            (ServerPhase::Body, OpResult::Bytes(n)) => {
                self.got_bytes += n;
                let body_bytes = self.request_bytes - HEADER_BYTES;
                if self.got_bytes < body_bytes {
                    return self.read_request(body_bytes);
                }
                self.phase = ServerPhase::Reply;
                Op::Compute { ns: SERVER_COMPUTE_NS }
            }
            (ServerPhase::Reply, _) => {
                self.phase = ServerPhase::Idle;
                Op::Write { chan: self.from_server, bytes: self.reply_bytes }
            }
            (phase, last) => panic!("tbench_srv: result {last:?} in phase {phase:?}"),
        }
    }
}

/// Makes the N connections, forks the N clients and then their N servers, times
/// the window, stops the clients and reaps all 2N processes.
struct Main {
    t: Tbench,
    stop: Rc<Cell<bool>>,
    /// Connection ids returned so far.
    chans: Vec<ChanId>,
    /// Per connection: its id and the pair's request slot.
    pairs: Vec<(ChanId, Rc<Cell<Request>>)>,
    /// Processes forked so far: clients first, then servers.
    forked: u64,
    /// The warmup/window ops, built once all processes exist.
    timing: Option<VecDeque<Op>>,
    reaped: u64,
}

impl Program for Main {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        let n = self.t.clients;
        if let OpResult::Chan(c) = last {
            self.chans.push(c);
        }
        if (self.chans.len() as u64) < n {
            return Op::TcpConnect;
        }
        if self.pairs.is_empty() {
            self.pairs = self.chans.iter().map(|&c| (c, Rc::new(Cell::new(Request::None)))).collect();
        }
        if self.forked < 2 * n {
            let i = self.forked;
            self.forked += 1;
            // `id` carries client → server, `id + 1` server → client.
            if i < n {
                let (chan, request) = self.pairs[i as usize].clone();
                let c = Client {
                    stop: self.stop.clone(),
                    request,
                    to_server: chan,
                    from_server: chan + 1,
                    phase: ClientPhase::Idle,
                    pending: VecDeque::new(),
                    current: Exchange::setup(),
                    got_bytes: 0,
                    start_ns: 0,
                    setup_done: false,
                };
                return Op::Fork { kind: ForkKind::Process, comm: Some("tbench".into()), program: Box::new(c) };
            }
            let (chan, request) = self.pairs[(i - n) as usize].clone();
            let s = Server {
                request,
                to_server: chan,
                from_server: chan + 1,
                phase: ServerPhase::Idle,
                got_bytes: 0,
                request_bytes: 0,
                reply_bytes: 0,
            };
            return Op::Fork { kind: ForkKind::Process, comm: Some("tbench_srv".into()), program: Box::new(s) };
        }
        let timing = self.timing.get_or_insert_with(|| {
            let mut ops = VecDeque::new();
            if self.t.warmup_ms > 0 {
                ops.push_back(Op::Sleep { ns: self.t.warmup_ms * 1_000_000 });
            }
            ops.extend([
                Op::Mark { label: MARK_START },
                Op::Sleep { ns: self.t.runtime_ms * 1_000_000 },
                Op::Mark { label: MARK_END },
            ]);
            ops
        });
        if let Some(op) = timing.pop_front() {
            return op;
        }
        // The window has ended: clients finish their current exchange and close,
        // and each server exits when it sees its client's close.
        self.stop.set(true);
        if self.reaped < 2 * n {
            self.reaped += 1;
            return Op::WaitChild;
        }
        Op::Exit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Workload;
    use schedlab_core::cost::MachineProfile;
    use schedlab_core::rng::Stream;
    use schedlab_core::{Engine, RunConfig, Topology};

    fn spec(s: &str) -> Tbench {
        match Workload::parse(s).unwrap() {
            Workload::Tbench(t) => t,
            w => panic!("{s} parsed as {w:?}"),
        }
    }

    fn err(s: &str) -> String {
        Workload::parse(s).unwrap_err().to_string()
    }

    fn run(spec: &str, seed: u64) -> RunResult {
        let topo = Topology::parse("1x1x4x1").unwrap();
        let profile = MachineProfile::from_toml(include_str!("../../../machines/kvm-haswell.toml"), "kvm-haswell").unwrap();
        let policy = schedlab_policies::policy_by_name("cfs@4.19", &[]).unwrap();
        let w = Workload::parse(spec).unwrap();
        let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
        Engine::new(topo, profile, policy, cfg, w.main_comm(), w.main_program()).run()
    }

    fn mb_per_s(res: &RunResult) -> f64 {
        payload_bytes(res) as f64 / 1e6 / (res.elapsed_ns() as f64 / 1e9)
    }

    #[test]
    fn tbench_spec_defaults_and_values() {
        assert_eq!(spec("tbench clients=4"), Tbench { clients: 4, runtime_ms: 10_000, warmup_ms: 2_000 });
        assert_eq!(spec("tbench clients=16 runtime_ms=500 warmup_ms=0"), Tbench { clients: 16, runtime_ms: 500, warmup_ms: 0 });
        assert!(spec("tbench clients=3").banner().contains("3 clients"));
    }

    #[test]
    fn tbench_spec_errors_name_field_value_and_form() {
        assert_eq!(
            err("tbench"),
            "invalid workload tbench clients '(missing)': expected clients=N, an integer from 1 to 4096, e.g. 'tbench clients=4'"
        );
        assert_eq!(err("tbench clients=0"), "invalid workload tbench clients '0': expected an integer from 1 to 4096");
        assert_eq!(err("tbench clients=two"), "invalid workload tbench clients 'two': expected an integer from 1 to 4096");
        assert_eq!(
            err("tbench clients=1 runtime_ms=0"),
            "invalid workload tbench runtime_ms '0': expected an integer from 1 to 100000000"
        );
        assert_eq!(
            err("tbench clients=1 warmup_ms=-1"),
            "invalid workload tbench warmup_ms '-1': expected an integer from 0 to 100000000"
        );
        assert_eq!(
            err("tbench clients=1 loadfile=client.txt"),
            "invalid workload tbench parameter 'loadfile=client.txt': expected one of the keys clients, runtime_ms, warmup_ms"
        );
        assert_eq!(
            err("tbench clients=1 clients=2"),
            "invalid workload tbench parameter 'clients=2': expected each key at most once"
        );
    }

    #[test]
    fn tbench_mix_shares_add_up_and_payload_dominates() {
        assert_eq!(OP_MIX.iter().map(|m| m.1).sum::<u64>(), 1000);
        assert_eq!(SIZE_MIX.iter().map(|m| m.0).sum::<u64>(), 1000);
        // Over many draws: about 36 % ReadX/WriteX, mean payload 16 KiB, and the
        // payload is most of the bytes moved.
        let mut rng = SimRng::new(7, Stream::Workload);
        let draws = 100_000u64;
        let (mut payload, mut moved, mut data_ops) = (0u64, 0u64, 0u64);
        for _ in 0..draws {
            let x = Exchange::draw(&mut rng);
            assert!(x.request_bytes > HEADER_BYTES && x.reply_bytes > HEADER_BYTES, "{x:?}");
            payload += x.payload_bytes;
            moved += x.request_bytes + x.reply_bytes;
            data_ops += (x.payload_bytes > 0) as u64;
        }
        let data_share = data_ops as f64 / draws as f64;
        assert!((0.35..0.37).contains(&data_share), "ReadX+WriteX share {data_share}");
        let mean_size = payload as f64 / data_ops as f64;
        assert!((15_500.0..17_300.0).contains(&mean_size), "mean payload {mean_size}");
        assert!(payload as f64 / moved as f64 > 0.95, "payload {payload} of {moved} bytes");
    }

    #[test]
    fn tbench_payload_sizes_are_counted_exactly() {
        let mut h = schedlab_core::stats::latency_histogram();
        let mut expected = 0;
        for (i, &(_, size)) in SIZE_MIX.iter().enumerate() {
            for _ in 0..(1000 + i as u64) {
                h.record(size).unwrap();
                expected += size;
            }
        }
        let counted: u64 = SIZE_MIX.iter().map(|&(_, size)| size * h.count_at(size)).sum();
        assert_eq!(counted, expected);
        assert_eq!(SIZE_MIX.iter().map(|&(_, size)| h.count_at(size)).sum::<u64>(), h.len());
    }

    #[test]
    fn tbench_small_run_completes_with_throughput_and_latency() {
        let s = "tbench clients=2 runtime_ms=200 warmup_ms=50";
        let r = run(s, 1);
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        assert!(!r.timed_out);
        // Main, 2 clients and 2 servers all ran and exited.
        assert_eq!(r.tasks.iter().filter(|t| t.comm == "tbench").count(), 3);
        assert_eq!(r.tasks.iter().filter(|t| t.comm == "tbench_srv").count(), 2);
        // The window is the runtime, give or take main's wakeup delays.
        assert!(r.elapsed_ns().abs_diff(200_000_000) < 1_000_000, "window {} ns", r.elapsed_ns());
        let tput = mb_per_s(&r);
        assert!(tput > 0.0, "throughput {tput}");
        let lat = &r.metrics[&OP_LATENCY];
        // Every exchange pays at least two TCP sends and two receives.
        assert!(lat.min() > 10_000 && lat.max() < 10_000_000, "latency {}..{} ns", lat.min(), lat.max());
        // About 36 % of operations carry payload.
        let share = r.metrics[&PAYLOAD_BYTES].len() as f64 / lat.len() as f64;
        assert!((0.3..0.42).contains(&share), "payload share {share}");
    }

    #[test]
    fn tbench_throughput_doubles_from_one_to_two_clients_on_four_cpus() {
        let one = mb_per_s(&run("tbench clients=1 runtime_ms=200 warmup_ms=50", 3));
        let two = mb_per_s(&run("tbench clients=2 runtime_ms=200 warmup_ms=50", 3));
        let ratio = two / one;
        assert!((1.5..2.5).contains(&ratio), "1 client {one:.1} MB/s, 2 clients {two:.1} MB/s, ratio {ratio:.2}");
    }

    #[test]
    fn tbench_result_line_has_tbench_format() {
        let s = "tbench clients=2 runtime_ms=200 warmup_ms=50";
        let r = run(s, 2);
        let line = Workload::parse(s).unwrap().result_line(&r);
        let rest = line.strip_prefix("Throughput ").expect(&line);
        let (tput, rest) = rest.split_once(" MB/sec  2 clients  2 procs  max_latency=").expect(&line);
        let (lat, unit) = rest.split_once(' ').expect(&line);
        assert_eq!(unit, "ms", "{line}");
        assert_eq!(tput.split_once('.').map(|(_, d)| d.len()), Some(4), "{line}");
        assert_eq!(lat.split_once('.').map(|(_, d)| d.len()), Some(3), "{line}");
        assert!((tput.parse::<f64>().unwrap() - mb_per_s(&r)).abs() < 1e-3, "{line}");
        let max_ms = r.metrics[&OP_LATENCY].max() as f64 / 1e6;
        assert!((lat.parse::<f64>().unwrap() - max_ms).abs() < 1e-3, "{line}");
    }
}
