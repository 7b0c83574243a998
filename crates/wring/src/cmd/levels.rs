//! `wring levels`: workspace memory per algorithm and level, and optionally the managers'
//! statistics after a short self-run.

use anyhow::{Context, Result};
use std::sync::Arc;
use wring_engine::levels::{level_table, LevelRow};

use wring_engine::offload::{Offload, OffloadConfig};
use wring_engine::stream::compress_batch;
use wring_engine::{Algorithm, CompressSpec, Engine, EngineConfig, Policy};

/// Options of `wring levels`.
#[derive(clap::Args)]
pub struct Args {
    /// Only these algorithms, comma-separated (zstd,zlib,lzo,lz4,lz4hc,lzo-rle,deflate)
    #[arg(long, value_delimiter = ',')]
    algorithms: Vec<String>,
    /// Also compress a small generated sample at every level and print the managers' statistics
    #[arg(long)]
    stats: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    format: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Markdown,
    Csv,
}

pub fn run(args: Args) -> Result<()> {
    let algorithms = parse_algorithms(&args.algorithms)?;
    let engine = Arc::new(Engine::new(EngineConfig::default()));
    let rows = level_table(&engine, &algorithms);
    match args.format {
        Format::Markdown => print_markdown(&rows),
        Format::Csv => print_csv(&rows)?,
    }
    if args.stats {
        let offload = Offload::new(Arc::clone(&engine), OffloadConfig::for_engine(&engine))?;
        self_run(&offload, &rows);
        print_stats(&engine);
    }
    Ok(())
}

fn parse_algorithms(names: &[String]) -> Result<Vec<Algorithm>> {
    names
        .iter()
        .map(|n| {
            n.trim()
                .parse::<Algorithm>()
                .with_context(|| "in --algorithms".to_string())
        })
        .collect()
}

fn kb(bytes: usize) -> String {
    format!("{}", bytes.div_ceil(1024))
}

fn print_markdown(rows: &[LevelRow]) {
    println!("| algorithm | level | default | btrfs | memory (KB) | with buffer (KB) | kernel formula (KB) |");
    println!("|---|---:|:---:|:---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.algorithm,
            r.level,
            if r.default { "*" } else { "" },
            if r.in_btrfs { "yes" } else { "no" },
            kb(r.workspace_bytes),
            kb(r.total_bytes),
            r.kernel_bytes.map(kb).unwrap_or_default(),
        );
    }
}

fn print_csv(rows: &[LevelRow]) -> Result<()> {
    let mut w = csv::Writer::from_writer(std::io::stdout().lock());
    w.write_record([
        "algorithm",
        "level",
        "default",
        "btrfs",
        "memory_kb",
        "with_buffer_kb",
        "kernel_formula_kb",
    ])?;
    for r in rows {
        w.write_record([
            r.algorithm.to_string(),
            r.level.to_string(),
            r.default.to_string(),
            r.in_btrfs.to_string(),
            kb(r.workspace_bytes),
            kb(r.total_bytes),
            r.kernel_bytes.map(kb).unwrap_or_default(),
        ])?;
    }
    w.flush().context("writing the CSV to stdout")?;
    Ok(())
}

/// A deterministic, compressible sample: eight 128 KiB extents of generated text.
fn sample(max_extent: usize) -> Vec<Vec<u8>> {
    let mut state = 0x2545_f491_u32;
    (0..8)
        .map(|_| {
            let mut v = Vec::with_capacity(max_extent + 32);
            while v.len() < max_extent {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                v.extend_from_slice(
                    format!("{} extent {} level\n", state % 5003, state % 97).as_bytes(),
                );
            }
            v.truncate(max_extent);
            v
        })
        .collect()
}

fn self_run(offload: &Offload, rows: &[LevelRow]) {
    let extents = sample(offload.engine().max_extent());
    let inputs: Vec<&[u8]> = extents.iter().map(Vec::as_slice).collect();
    for r in rows {
        let spec = CompressSpec::new(r.algorithm, r.level);
        for result in compress_batch(offload, spec, Policy::Force, &inputs) {
            if let Err(e) = result {
                eprintln!("wring: {spec}: {e}");
            }
        }
    }
}

fn print_stats(engine: &Engine) {
    println!();
    println!("| algorithm | hits | scans up | allocations | waits | reclaims | frees | workspaces | resident (KB) | peak (KB) | streams |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (alg, s) in engine.stats().managers {
        println!(
            "| {alg} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.hits,
            s.scans_up,
            s.allocations,
            s.waits,
            s.reclaims,
            s.frees,
            s.workspaces,
            kb(s.resident_bytes),
            kb(s.peak_bytes),
            s.streams
        );
    }
}
