//! `pod jobs`, `pod jobs kill JOB` and `pod jobs output JOB`: the pod's background jobs
//! (`list_jobs`, `kill_job`, `get_job_output`).

use std::process::ExitCode;

use crate::protocol::answer::{Ack, JobOutput, Jobs};
use crate::protocol::{JobInfo, Method, Request};
use crate::safe_text;

use super::args::JobsAction;
use super::connect::{ask, connect, exit, snapshot};
use super::Paths;

pub fn run(paths: &Paths, action: Option<JobsAction>) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        snapshot(&mut events, &paths.endpoint).await?;
        let answer = match action {
            None => ask::<Jobs>(&mut events, &mut sink, Method::ListJobs)
                .await?
                .map(|answer| table(&answer.jobs)),
            Some(JobsAction::Kill { job }) => {
                sink.send(&Request::new(Method::Hello {
                    client: "pod jobs".into(),
                }))
                .await?;
                ask::<Ack>(&mut events, &mut sink, Method::KillJob { job })
                    .await?
                    .map(|_| format!("killed job {job}\n"))
            }
            Some(JobsAction::Output { job }) => {
                ask::<JobOutput>(&mut events, &mut sink, Method::GetJobOutput { job })
                    .await?
                    .map(|answer| output(&answer.output, &answer.jobs))
            }
        };
        match answer {
            Ok(text) => {
                print!("{text}");
                Ok(ExitCode::SUCCESS)
            }
            Err(why) => {
                eprintln!("pod: {why}");
                Ok(ExitCode::from(exit::FAILED))
            }
        }
    })
}

/// A job's output so far, its control characters shown as visible escapes
/// (a job's output is any program's), then a line saying how the job
/// stands.
fn output(text: &str, jobs: &[JobInfo]) -> String {
    let mut out = safe_text::lines(text).into_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for job in jobs {
        out.push_str(&format!("[job {}: {}]\n", job.job, state(job)));
    }
    out
}

fn state(job: &JobInfo) -> String {
    match (job.running, job.exit_code, job.signal) {
        (true, _, _) => "running".to_owned(),
        (false, Some(code), _) => format!("exit {code}"),
        (false, None, Some(signal)) => format!("signal {signal}"),
        (false, None, None) => "ended".to_owned(),
    }
}

/// One line per job: id, state, start time, command.
fn table(jobs: &[JobInfo]) -> String {
    if jobs.is_empty() {
        return "no background jobs\n".into();
    }
    jobs.iter()
        .map(|job| {
            format!(
                "{:>4}  {:<10}  {}  {}\n",
                job.job,
                state(job),
                job.started_at,
                safe_text::line(&job.command)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_job_on_a_line_with_its_state_and_a_safe_command() {
        let job = |job, running, exit_code, command: &str| JobInfo {
            job,
            command: command.into(),
            started_at: "2026-01-02T03:04:05Z".into(),
            running,
            exit_code,
            signal: None,
        };
        let text = table(&[
            job(1, true, None, "python3 -m http.server"),
            job(2, false, Some(1), "x\u{1b}[2K"),
        ]);
        assert_eq!(
            text,
            "   1  running     2026-01-02T03:04:05Z  python3 -m http.server\n   2  exit 1      \
             2026-01-02T03:04:05Z  x\\e[2K\n"
        );
        assert_eq!(table(&[]), "no background jobs\n");
    }
}
