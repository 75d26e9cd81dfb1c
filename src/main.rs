//! The `newsdedup` command line. Thin: parses the arguments (`cli`), hands each command its
//! flags (`commands`), and turns an error into the exit status it stands for.

mod cli;
mod commands;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, Command};
use commands::load_config;
use newsdedup::correct;
use newsdedup::settings;
use std::collections::HashSet;

fn main() {
    let started = std::time::Instant::now();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which `run` settings came from a flag or its variable (they override the config file);
    // which flags were given on the command line (`audit`; `replay`'s --metrics-addr).
    let given = match matches.subcommand() {
        Some(("run", m)) | Some(("standby", m)) | Some(("replay", m)) => {
            settings::given_arguments(m)
        }
        _ => HashSet::new(),
    };
    let command_line = match matches.subcommand() {
        // `index rebuild`: the flags of the nested command.
        Some(("index", m)) => m
            .subcommand()
            .map_or_else(HashSet::new, |(_, m)| command_line_arguments(m)),
        Some((_, m)) => command_line_arguments(m),
        None => HashSet::new(),
    };
    if let Err(e) = dispatch(cli, &given, &command_line, started) {
        // A stop that left work for the next start is not an error: nothing is lost.
        if let Some(stop) = e.downcast_ref::<newsdedup::kafka::stop::IncompleteStop>() {
            eprintln!("newsdedup: {stop}");
            std::process::exit(newsdedup::kafka::stop::EXIT_INCOMPLETE_STOP);
        }
        if let Some(pending) = e.downcast_ref::<correct::NotConfirmed>() {
            eprintln!("newsdedup: {pending}");
            std::process::exit(correct::EXIT_NOT_CONFIRMED);
        }
        eprintln!("newsdedup: error: {e:#}");
        std::process::exit(1);
    }
}

fn dispatch(
    cli: Cli,
    given: &HashSet<String>,
    command_line: &HashSet<String>,
    started: std::time::Instant,
) -> Result<()> {
    match cli.command {
        Command::Fingerprint(args) => commands::fingerprint::execute(args),
        Command::Compare(args) => commands::compare::execute(args),
        Command::Batch(args) => commands::batch::execute(args, started),
        Command::Run { args, common } => {
            newsdedup::service::run(*args, given, load_config(&common)?)
        }
        Command::Standby {
            args,
            max_ready_lag,
            common,
        } => newsdedup::service::standby(*args, given, load_config(&common)?, max_ready_lag),
        Command::Replay { args, common } => {
            newsdedup::replay::replay(*args, given, command_line, load_config(&common)?)
        }
        Command::Correct { command } => commands::correct::execute(command),
        Command::Audit { args, common } => commands::audit::execute(*args, common, command_line),
        Command::Health(args) => commands::health::execute(args),
        Command::Index { command } => commands::index::execute(command, command_line),
    }
}

/// The ids of the arguments given on the command line (not from a variable or a default).
fn command_line_arguments(matches: &clap::ArgMatches) -> HashSet<String> {
    matches
        .ids()
        .filter(|id| {
            matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|id| id.as_str().to_owned())
        .collect()
}
