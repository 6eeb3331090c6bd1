use std::process::ExitCode;

use pod::cli::config::ConfigFile;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("POD_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<_> = std::env::args_os().collect();
    // Not a command for people: the process `pod serve` starts to clean up
    // after itself (see `pod::tools::reaper`); no config, no flags.
    if args
        .get(1)
        .is_some_and(|a| a == pod::tools::reaper::SUBCOMMAND)
    {
        return pod::tools::reaper::run();
    }
    let location = ConfigFile::locate(&args, std::env::var_os("POD_CONFIG"));
    let mut config = match ConfigFile::load(&location) {
        Ok(config) => config,
        // A config file that is missing or wrong is bad usage, like a bad
        // flag (clap exits 2 for those, and for a bad value from the file).
        Err(e) => {
            eprintln!("pod: {e}");
            return ExitCode::from(2);
        }
    };
    let path = config.path.as_deref().unwrap_or(std::path::Path::new("?"));
    match pod::cli::args::check_settings(&config.table) {
        Ok(unknown) => {
            let warnings: Vec<String> = unknown
                .iter()
                .map(|unknown| format!("config file {}: {unknown}; ignored", path.display()))
                .collect();
            for warning in &warnings {
                eprintln!("pod: warning: {warning}");
            }
            config.warnings = warnings;
        }
        Err(e) => {
            eprintln!("pod: config file {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let cli = match pod::cli::args::parse(args, &config.table) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match pod::cli::run(cli, config) {
        Ok(code) => code,
        // The reader of the output went away (`pod log | head`): there is
        // no one left to tell, and nothing failed that the user cares about.
        Err(e) if broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pod: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
