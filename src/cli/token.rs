//! `pod token create|list|revoke` and `pod url`: credentials for remote
//! clients, asked of the pod over its local socket only (the pod refuses
//! the token methods over the network and to its own descendants).

use std::process::ExitCode;

use super::args::{TokenCommand, UrlArgs};
use super::connect::{connect, exit, snapshot};
use super::Paths;
use crate::client::{Endpoint, Refusal};
use crate::protocol::answer::{Ack, Answer, Pairing, Token, Tokens};
use crate::protocol::{AccessLevel, Method};

pub fn run(paths: &Paths, command: TokenCommand) -> anyhow::Result<ExitCode> {
    match command {
        // Alone on stdout, so `pod token create > file` is the whole file.
        TokenCommand::Create { read_only, label } => {
            let issued = match ask::<Token>(paths, Method::IssueToken { read_only, label })? {
                Ok(issued) => issued,
                Err(code) => return Ok(code),
            };
            println!("{}", issued.token);
            let id = issued.id;
            eprintln!(
                "pod: device token {id} ({}); it is not shown again. Revoke it with `pod \
                 token revoke {id}`",
                scope(issued.scope)
            );
        }
        TokenCommand::List { json } => {
            let tokens = match ask::<Tokens>(paths, Method::ListTokens)? {
                Ok(listed) => listed.tokens,
                Err(code) => return Ok(code),
            };
            if json {
                println!("{}", serde_json::to_string(&tokens)?);
            } else if tokens.is_empty() {
                println!("no device tokens; make one with `pod token create`");
            } else {
                println!(
                    "{:<10} {:<10} {:<25} {:<25} LABEL",
                    "ID", "SCOPE", "CREATED", "LAST USED"
                );
                for t in tokens {
                    println!(
                        "{:<10} {:<10} {:<25} {:<25} {}",
                        t.id,
                        scope(t.scope),
                        t.created_at,
                        t.last_used.as_deref().unwrap_or("never"),
                        t.label.as_deref().unwrap_or("")
                    );
                }
            }
        }
        TokenCommand::Revoke { id } => {
            let method = Method::RevokeToken { id: id.clone() };
            if let Err(code) = ask::<Ack>(paths, method)? {
                return Ok(code);
            }
            println!("revoked device token {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn url(paths: &Paths, args: UrlArgs) -> anyhow::Result<ExitCode> {
    let method = Method::IssuePairing {
        read_only: args.read_only,
        host: args.host,
    };
    let url = match ask::<Pairing>(paths, method)? {
        Ok(pairing) => pairing.url,
        // No pod of this workspace listens: 1, as the contract says.
        Err(_) => return Ok(ExitCode::from(exit::FAILED)),
    };
    println!("{url}");
    if args.qr {
        match qrcode::QrCode::new(url.as_bytes()) {
            Ok(code) => println!(
                "{}",
                code.render::<qrcode::render::unicode::Dense1x2>()
                    .dark_color(qrcode::render::unicode::Dense1x2::Light)
                    .light_color(qrcode::render::unicode::Dense1x2::Dark)
                    .quiet_zone(true)
                    .build()
            ),
            Err(e) => eprintln!("pod: cannot draw the link as a QR code: {e}"),
        }
    }
    eprintln!("pod: the link pairs one device and is valid for 10 minutes");
    Ok(ExitCode::SUCCESS)
}

fn scope(scope: AccessLevel) -> &'static str {
    match scope {
        AccessLevel::Read => "read-only",
        _ => "full",
    }
}

/// Sends `method` over the local socket and waits for its answer; `Err`
/// with the exit code once the reason is said.
fn ask<A: Answer>(paths: &Paths, method: Method) -> anyhow::Result<Result<A, ExitCode>> {
    if paths.is_remote() {
        eprintln!(
            "pod: device tokens and pairing links are made over the pod's local socket only: \
             run this on the pod's machine, without --url"
        );
        return Ok(Err(ExitCode::from(exit::USAGE)));
    }
    let endpoint = Endpoint::Socket(paths.socket.clone());
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(Err(code)),
        };
        snapshot(&mut events, &endpoint).await?;
        match super::connect::ask(&mut events, &mut sink, method).await? {
            Ok(response) => Ok(Ok(response)),
            Err(Refusal::Refused { message, .. }) => {
                eprintln!("pod: {message}");
                Ok(Err(ExitCode::from(exit::FAILED)))
            }
            Err(other) => Err(other.into()),
        }
    })
}
