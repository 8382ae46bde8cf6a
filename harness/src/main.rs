//! `lockscale` command-line entry point: parse, dispatch, map errors to exit code 2.

use clap::Parser;
use lockscale::cli::{Cli, Command};
use lockscale::commands;

fn main() {
    let cli = Cli::parse();
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let repo = match &cli.repo {
        Some(r) => {
            let r = if r.is_absolute() {
                r.clone()
            } else {
                cwd.join(r)
            };
            r.canonicalize().unwrap_or(r)
        }
        None => lockscale::util::find_repo_root(&cwd),
    };
    let result = match &cli.command {
        Command::Build(a) => commands::build(&repo, a),
        Command::Sweep(a) => commands::sweep(&repo, a),
        Command::Plot(a) => commands::plot(&repo, a),
        Command::Report(a) => commands::report(a),
        Command::Compare(a) => commands::compare(a),
        Command::Gate(a) => commands::gate(&repo, a),
        Command::Project(a) => commands::project(a),
        Command::Merge(a) => commands::merge(a),
        Command::Schema(a) => commands::schema(&repo, a),
        Command::Guest(c) => commands::guest(&repo, c),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("lockscale: error: {e:#}");
            std::process::exit(2);
        }
    }
}
