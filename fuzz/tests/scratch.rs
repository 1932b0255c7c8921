use std::sync::Arc;
use clap::Parser;
use fuzz_support::Knobs;
use fuzz_support::memio::{MemIo, Wire};
use httplite::blocking::IdleSet;
use httplite::blocking::conn::{self, Ctx};
use httplite::cli::Cli;
use httplite::config::Config;
use httplite::jobs::{Jobs, Retention};
use httplite::routes::App;
use httplite::stats::Stats;
#[test]
fn scratch() {
    let input = std::fs::read(std::env::var("IN").unwrap()).unwrap();
    let cli = Cli::parse_from(["httplite"]);
    let pool = pool::Pool::builder().max_threads(1).build();
    let jobs = Jobs::new(pool, Retention { max_count: 10, max_age: std::time::Duration::from_secs(10) }, false);
    let app = Arc::new(App { root: None, stats: Arc::new(Stats::new(1)), worker_extra: Box::new(|_, _| {}), test_endpoints: false, jobs });
    let ctx = Ctx { app, config: Arc::new(Config::from_cli(&cli)), stats: Stats::new(1).worker(0), access_log: None, idle: IdleSet::default() };
    for style in 0..3 {
        let splits = match style { 0 => vec![0..input.len()], 1 => (0..input.len()).map(|i| i..i+1).collect(), _ => Knobs::new(&input).splits(input.len()) };
        let mut wire = Wire::default();
        conn::serve(&ctx, MemIo::new(&input, splits, Knobs::new(b"w"), &mut wire));
        eprintln!("style {style}: consumed {} of {}, shut {}\n{}", wire.consumed, input.len(), wire.write_shut, wire.output.escape_ascii());
    }
    eprintln!("{:?}", ctx.stats);
}
