use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use pod::cli::config::ConfigFile;
use pod::cli::{args::with_config_file, Cli};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("POD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<_> = std::env::args_os().collect();
    let location = ConfigFile::locate(&args, std::env::var_os("POD_CONFIG"));
    let config = match ConfigFile::load(&location) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("pod: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cli = match parse(args, &config) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match pod::cli::run(cli, config) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pod: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Parses the command line with the config file's values as defaults.
fn parse(args: Vec<std::ffi::OsString>, config: &ConfigFile) -> Result<Cli, clap::Error> {
    let cmd = with_config_file(Cli::command(), &config.table);
    Cli::from_arg_matches(&cmd.try_get_matches_from(args)?)
}
