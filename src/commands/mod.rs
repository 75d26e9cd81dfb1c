//! What each command does with its flags: one file per command, each with an `execute` that
//! takes the command's parsed flags (`crate::cli`), resolves the configuration and the engine's
//! parts, runs the library and reports. This file holds what several commands share: reading
//! the configuration, making the fingerprinter and opening the index with their warnings, and
//! opening input and output files.

pub mod audit;
pub mod batch;
pub mod compare;
pub mod correct;
pub mod fingerprint;
pub mod health;
pub mod index;

use crate::cli::CommonOpts;
use anyhow::{Context, Result};
use newsdedup::components::{Components, Overrides};
use newsdedup::config::Config;
use newsdedup::fingerprint::{Fingerprinter, ImageUse};
use newsdedup::index::RocksIndex;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

/// The configuration file of --config, or the built-in defaults.
pub fn load_config(common: &CommonOpts) -> Result<Config> {
    match &common.config {
        Some(path) => Ok(Config::load(path)?),
        None => Ok(Config::default()),
    }
}

/// The configuration file and the engine's parts as `overrides` change them; warnings printed.
fn resolve(common: &CommonOpts, overrides: Overrides) -> Result<(Config, Components)> {
    let config = load_config(common)?;
    let components = Components::resolve(&config, overrides)?;
    for w in &components.warnings {
        eprintln!("newsdedup: warning: {w}");
    }
    Ok((config, components))
}

/// The fingerprinter of `components`; a start-up image that could not be written is worth a
/// warning (every start then builds the tables again).
fn fingerprinter(components: &Components) -> Result<Fingerprinter> {
    let fp = components.fingerprinter()?;
    warn_about_image(&fp);
    Ok(fp)
}

/// The fingerprinter and the index in `dir` of `components` (see [`fingerprinter`]).
fn fingerprinter_and_index(
    components: &Components,
    dir: &Path,
) -> Result<(Fingerprinter, RocksIndex)> {
    let (fp, index) = components.open(dir)?;
    warn_about_image(&fp);
    Ok((fp, index))
}

fn warn_about_image(fp: &Fingerprinter) {
    if let ImageUse::NotWritten { path, error } = fp.image_use() {
        eprintln!(
            "newsdedup: warning: cannot write the start-up image {}: {error} (each start builds the tables again: set [image] dir to a writable directory, or enabled = false)",
            path.display()
        );
    }
}

/// Warns about each secret given with `-X` (see `properties::secrets_on_command_line`).
fn warn_about_secret_flags(flags: &[String]) {
    for w in newsdedup::kafka::properties::secrets_on_command_line(flags) {
        eprintln!("newsdedup: warning: {w}");
    }
}

/// A buffered reader of the file at `path`; absent or `-`: standard input.
fn open_input(path: Option<&Path>) -> Result<Box<dyn BufRead + Send>> {
    match path {
        None => Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin()))),
        Some(p) if p.as_os_str() == "-" => {
            Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin())))
        }
        Some(p) => {
            let f = File::open(p).with_context(|| format!("cannot open input {}", p.display()))?;
            Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
        }
    }
}

/// A buffered writer creating the file at `path`; `-`: standard output.
fn open_output(path: &Path) -> Result<Box<dyn Write + Send>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(BufWriter::with_capacity(1 << 16, io::stdout())))
    } else {
        let f = File::create(path)
            .with_context(|| format!("cannot create output {}", path.display()))?;
        Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
    }
}
