//! Pitfall: starvation of I/O and timers by a task that is always ready.
//!
//! One runtime thread runs three tasks: a *cruncher* that works in 20 µs
//! slices and calls `yield_now()` between them (so it is always ready), a
//! *ticker* that wants to wake every 10 ms, and an *echo* task answering a
//! client thread that pings every 20 ms. Three runs:
//!
//! 1. budget disabled (`Builder::budget(usize::MAX)`): the run queue is
//!    never empty, so the loop never reaches `epoll_wait`; the timer and the
//!    socket wait until the cruncher is done.
//! 2. the default budget (128 polls, then a non-blocking `epoll_wait`): the
//!    timer and the pings are served on time, and the cruncher barely slows.
//! 3. a cruncher that never awaits at all: no budget can help, since the
//!    budget counts polls and this is one endless poll. Only the task itself
//!    can fix it (yield, or move the work to a thread).
//!
//! Run: `cargo run --release -p executor --example pitfall_starvation`
//! Explained in `docs/pitfalls/starvation.md`.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream as StdStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

use executor::net::TcpListener;

/// How long the cruncher works (each run).
const WORK: Duration = Duration::from_millis(1000);
/// One slice of work between two yields.
const SLICE: Duration = Duration::from_micros(20);
/// The ticker's period.
const TICK: Duration = Duration::from_millis(10);
/// The client's ping period.
const PING_EVERY: Duration = Duration::from_millis(20);

#[derive(Clone, Copy)]
enum Cruncher {
    /// `yield_now().await` after every slice.
    Yields,
    /// Never awaits until done.
    NeverYields,
}

fn main() -> io::Result<()> {
    println!(
        "a cruncher works {} ms in {} µs slices; a timer wants to tick every {} ms; \
         a client pings every {} ms\n",
        WORK.as_millis(),
        SLICE.as_micros(),
        TICK.as_millis(),
        PING_EVERY.as_millis()
    );
    run(
        "budget disabled, cruncher yields (broken)",
        usize::MAX,
        Cruncher::Yields,
        WORK,
    )?;
    run(
        "budget 128 (the default), cruncher yields (fixed)",
        executor::DEFAULT_BUDGET,
        Cruncher::Yields,
        WORK,
    )?;
    run(
        "budget 128, cruncher never yields (no budget can help)",
        executor::DEFAULT_BUDGET,
        Cruncher::NeverYields,
        WORK / 2,
    )?;
    println!(
        "The budget bounds how many polls run between two looks at epoll; it cannot \
         interrupt a poll. Long work must yield, or go to a thread."
    );
    Ok(())
}

fn run(title: &str, budget: usize, cruncher: Cruncher, work: Duration) -> io::Result<()> {
    println!("== {title}");
    let rt = executor::Builder::new().budget(budget).build()?;
    let (slices, worst_tick, ticks) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap())?;
        let addr = listener.local_addr()?;
        let pings = work.as_millis() as u64 / PING_EVERY.as_millis() as u64;
        let client = std::thread::spawn(move || ping(addr, pings));
        let (stream, _) = listener.accept().await?;

        // Echo each 8-byte ping until the client hangs up.
        let echo = executor::spawn(async move {
            let mut buf = [0u8; 8];
            while let Ok(8) = read_full(&stream, &mut buf).await {
                if stream.write_all(&buf).await.is_err() {
                    break;
                }
            }
        });
        // Tick until the cruncher is done; note the worst lateness.
        let done = Rc::new(Cell::new(false));
        let ticker = executor::spawn({
            let done = done.clone();
            async move {
                let (mut worst, mut ticks) = (Duration::ZERO, 0u32);
                while !done.get() {
                    let due = Instant::now() + TICK;
                    executor::sleep_until(due).await;
                    worst = worst.max(due.elapsed());
                    ticks += 1;
                }
                (worst, ticks)
            }
        });
        let crunch = executor::spawn(async move {
            let start = Instant::now();
            let mut slices = 0u64;
            while start.elapsed() < work {
                let slice = Instant::now();
                while slice.elapsed() < SLICE {
                    std::hint::spin_loop();
                }
                slices += 1;
                if matches!(cruncher, Cruncher::Yields) {
                    executor::yield_now().await;
                }
            }
            slices
        });
        let slices = crunch.await.expect("cruncher");
        done.set(true);
        let (worst_tick, ticks) = ticker.await.expect("ticker");
        // The echo task ends when the client hangs up; only then is joining
        // the client thread (a blocking call) harmless here.
        echo.await.expect("echo");
        let rtts = client.join().expect("client thread")?;
        report_pings(&rtts);
        Ok::<_, io::Error>((slices, worst_tick, ticks))
    })?;
    println!(
        "   timer: ticked {ticks} times while the cruncher ran {} ms, worst lateness {:.1} ms",
        work.as_millis(),
        worst_tick.as_secs_f64() * 1e3
    );
    println!(
        "   cruncher: {slices} slices; the loop reached epoll_wait {} times",
        rt.stats().ticks
    );
    println!();
    Ok(())
}

async fn read_full(stream: &executor::net::TcpStream, mut buf: &mut [u8]) -> io::Result<usize> {
    let want = buf.len();
    while !buf.is_empty() {
        match stream.read(buf).await? {
            0 => return Ok(want - buf.len()),
            n => buf = &mut buf[n..],
        }
    }
    Ok(want)
}

/// The client thread: `n` pings, one per period; returns each round trip.
fn ping(addr: SocketAddr, n: u64) -> io::Result<Vec<Duration>> {
    let mut s = StdStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut rtts = Vec::new();
    let start = Instant::now();
    for i in 0..n {
        let at = start + PING_EVERY * i as u32;
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        s.write_all(&i.to_be_bytes())?;
        let mut back = [0u8; 8];
        s.read_exact(&mut back)?;
        rtts.push(sent.elapsed());
    }
    Ok(rtts)
}

fn report_pings(rtts: &[Duration]) {
    let mut sorted = rtts.to_vec();
    sorted.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "   pings: {} round trips, median {:.3} ms, worst {:.1} ms",
        sorted.len(),
        ms(sorted[sorted.len() / 2]),
        ms(*sorted.last().unwrap())
    );
}
