use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use pod::cli::{args::with_config_file, Cli};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("POD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match pod::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pod: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Parses the command line with the config file's values as defaults.
fn parse() -> Result<Cli, clap::Error> {
    let mut cmd = Cli::command();
    if let Some(table) = config_file() {
        cmd = with_config_file(cmd, &table);
    }
    Cli::from_arg_matches(&cmd.get_matches())
}

fn config_file() -> Option<toml::Table> {
    let path = dirs::config_dir()?.join("pod").join("config.toml");
    let text = std::fs::read_to_string(&path).ok()?;
    match text.parse::<toml::Table>() {
        Ok(table) => Some(table),
        Err(e) => {
            eprintln!("pod: ignoring {}: {e}", path.display());
            None
        }
    }
}
