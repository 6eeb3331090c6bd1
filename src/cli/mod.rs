//! The `pod` command's front ends: each subcommand in its own module.

mod acp;
mod agents;
mod approve;
pub mod args;
pub mod config;
mod connect;
mod exec;
mod jobs;
mod log;
mod paths;
mod plain;
mod replay;
mod rewind;
mod rules;
mod send;
mod serve;
mod sessions;
mod status;
mod token;
mod transcript;

pub use args::{Cli, Command};
pub use config::ConfigFile;
pub use paths::{derived_name, Paths};

use std::process::ExitCode;

/// Runs the parsed command line; `config` is the config file it was parsed
/// with (its flag defaults are already applied; its tables are used here).
pub fn run(cli: Cli, config: ConfigFile) -> anyhow::Result<ExitCode> {
    // What it cannot resolve is how it was called (a `--url` without a
    // token, a token file it cannot read, no home): bad usage, exit 2.
    let paths = match Paths::resolve(&cli.global) {
        Ok(paths) => paths,
        Err(e) => {
            eprintln!("pod: {e:#}");
            return Ok(ExitCode::from(connect::exit::USAGE));
        }
    };
    if !paths.is_remote() && !matches!(cli.command, Some(Command::Log(_) | Command::Serve(_))) {
        paths.check_socket_dir()?;
    }
    match cli.command {
        Some(Command::Serve(args)) => serve::run(&paths, args, config, cli.given.has("model")),
        Some(Command::Send(args)) => send::run(
            &paths,
            args,
            send::Starting {
                config: cli.global.config.as_deref(),
                given: &cli.given.argv,
                socket_given: cli.global.socket.is_some(),
            },
        ),
        Some(Command::Acp(ref serve)) => acp::run(&cli, serve, &paths),
        Some(Command::Exec(args)) => exec::run(&paths, *args, config),
        Some(Command::Replay(args)) => {
            replay::run(&paths, *args, config, cli.global.workspace.clone())
        }
        Some(Command::Approve(args)) => approve::approve(&paths, args),
        Some(Command::Deny(args)) => approve::deny(&paths, args),
        Some(Command::Pending) => approve::pending(&paths),
        Some(Command::Status { json }) => status::status(&paths, json),
        Some(Command::Stop) => status::stop(&paths),
        Some(Command::Pause) => status::pause(&paths, true),
        Some(Command::Resume) => status::pause(&paths, false),
        Some(Command::Undo(f)) => rewind::undo(&paths, forcing(f)),
        Some(Command::Rewind(args)) => rewind::rewind(
            &paths,
            rewind::RewindWhat {
                seq: args.seq,
                checkpoint: args.checkpoint,
                files_only: args.files_only,
                conversation_only: args.conversation_only,
                forcing: forcing(args.forcing),
            },
        ),
        Some(Command::Diff(args)) => rewind::diff(&paths, args.turn, args.since),
        Some(Command::Blame { file }) => rewind::blame(&paths, file),
        Some(Command::List) => status::list(&paths),
        Some(Command::Rules { action }) => rules::run(&paths, action),
        Some(Command::Jobs { action }) => jobs::run(&paths, action),
        Some(Command::Agents { json, action }) => agents::run(&paths, json, action),
        Some(Command::Log(args)) => log::run(&paths.name, &paths, args),
        Some(Command::Sessions { json, all }) => sessions::run(&paths, json, all),
        Some(Command::Attach { inline, tui }) => {
            // Checked here so that every client command words a missing pod
            // alike; the TUI itself keeps reconnecting to a pod that goes away.
            if !paths.is_remote() && connect::nobody_listens(&paths.socket) {
                return Ok(connect::no_pod(&paths.endpoint));
            }
            serve::attach(&paths, tui.notify_or(&cli.tui), inline)
        }
        Some(Command::Token(command)) => token::run(&paths, command),
        Some(Command::Url(args)) => token::url(&paths, args),
        None => plain::run(&cli, &paths),
    }
}

fn forcing(f: args::ForceArgs) -> rewind::Forcing {
    rewind::Forcing {
        force: f.force,
        kill_jobs: f.kill_jobs,
    }
}

/// A current-thread tokio runtime for the client commands.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}
