//! `pod acp`: the Agent Client Protocol for an editor (`crate::acp`), on
//! the pod of the session's `cwd`, started as plain `pod` starts one.
//!
//! stdout is the protocol's: nothing else may be written there, so every
//! word for a person goes to stderr, and a pod this command starts writes
//! to its own log file.

use std::path::Path;
use std::process::ExitCode;

use super::args::{Cli, ServeArgs};
use super::connect::nobody_listens;
use super::{serve, Paths};
use crate::acp::Place;

/// `after`: the `serve` flags typed after `acp` (those before are `cli.serve`).
pub fn run(cli: &Cli, after: &ServeArgs, paths: &Paths) -> anyhow::Result<ExitCode> {
    if let Some(code) = serve::missing_script(&cli.serve).or_else(|| serve::missing_script(after)) {
        return Ok(code);
    }
    let global = cli.global.clone();
    let config = cli.global.config.clone();
    let argv = cli.given.argv.clone();
    let remote = paths.is_remote().then(|| Place {
        endpoint: paths.endpoint.clone(),
        name: paths.name.clone(),
    });
    // The editor names the project (a session's `cwd`) unless `--workspace`
    // did; `--name` and `--socket` still say which pod that is.
    let fixed = global.workspace.is_some();
    let locate = move |cwd: &Path| -> anyhow::Result<Place> {
        if let Some(place) = &remote {
            return Ok(place.clone());
        }
        let mut global = global.clone();
        if !fixed {
            global.workspace = Some(cwd.to_owned());
        }
        let paths = Paths::resolve(&global)?;
        paths.check_socket_dir()?;
        if nobody_listens(&paths.socket) {
            serve::start_background(&paths, config.as_deref(), &argv)?;
        }
        Ok(Place {
            endpoint: paths.endpoint,
            name: paths.name,
        })
    };
    super::runtime()?.block_on(crate::acp::serve(Box::new(locate)))?;
    Ok(ExitCode::SUCCESS)
}
